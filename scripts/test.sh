#!/usr/bin/env bash
# The project's test command (README.md names it): every package, with the
# race detector, against real servers the tests start themselves on free
# loopback ports. A missing server binary fails the run; nothing is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -race -count=1 -timeout 12m ./... "$@"
