#!/usr/bin/env bash
# Generates the Go code of the Sluice API (service/gen) from proto/ with
# pinned tools: buf from npm, protoc-gen-go and protoc-gen-connect-go from
# the Go module proxy, installed once into the git-ignored .ci/tmp/gen.
#
#   scripts/gen.sh          lint proto/ and regenerate service/gen
#   scripts/gen.sh --check  lint, regenerate into a temporary directory and
#                           fail when the checked-in code differs (CI)
set -euo pipefail
cd "$(dirname "$0")/.."

tools="$PWD/.ci/tmp/gen"
mkdir -p "$tools/bin"
if [ ! -x "$tools/node_modules/.bin/buf" ]; then
  npm install --prefix "$tools" --no-audit --no-fund --loglevel=error @bufbuild/buf@1.75.0 >&2
fi
[ -x "$tools/bin/protoc-gen-go" ] || GOBIN="$tools/bin" go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
[ -x "$tools/bin/protoc-gen-connect-go" ] || GOBIN="$tools/bin" go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
export PATH="$tools/bin:$tools/node_modules/.bin:$PATH"

buf lint proto
if [ "${1:-}" = "--check" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  buf generate -o "$out"
  if ! diff -r "$out/service/gen" service/gen; then
    echo "scripts/gen.sh: service/gen differs from proto/: run scripts/gen.sh and commit the result" >&2
    exit 1
  fi
  echo "service/gen matches proto/"
else
  rm -rf service/gen
  buf generate
fi
