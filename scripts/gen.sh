#!/usr/bin/env bash
# Generates the code of the Sluice API from proto/ with pinned tools: the
# Go code (service/gen) with buf from npm, protoc-gen-go and
# protoc-gen-connect-go from the Go module proxy, installed once into the
# git-ignored .ci/tmp/gen; the TypeScript client's (clients/typescript/
# src/gen) with protoc-gen-es from its locked npm dependencies; and the
# API reference, docs/api.md (internal/cmd/apidoc).
#
#   scripts/gen.sh          lint proto/ and regenerate both
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
ts=clients/typescript
[ -x "$ts/node_modules/.bin/protoc-gen-es" ] || (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error >&2)

buf lint proto
if [ "${1:-}" = "--check" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  buf generate -o "$out"
  (cd "$ts" && buf generate -o "$out/ts")
  buf build proto -o "$out/image.binpb"
  go run ./internal/cmd/apidoc "$out/image.binpb" > "$out/api.md"
  if ! diff -r "$out/service/gen" service/gen || ! diff -r "$out/ts/src/gen" "$ts/src/gen" || ! diff "$out/api.md" docs/api.md; then
    echo "scripts/gen.sh: the generated code differs from proto/: run scripts/gen.sh and commit the result" >&2
    exit 1
  fi
  echo "service/gen, $ts/src/gen and docs/api.md match proto/"
else
  rm -rf service/gen "$ts/src/gen"
  buf generate
  (cd "$ts" && buf generate)
  image=$(mktemp)
  buf build proto -o "$image"
  go run ./internal/cmd/apidoc "$image" > docs/api.md
  rm -f "$image"
fi
