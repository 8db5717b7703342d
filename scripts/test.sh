#!/usr/bin/env bash
# The project's test command: formatting, vet, and every test with the race detector.
# Run from anywhere; it works on a fresh machine with Go installed (modules come from the
# module proxy). Tests that need ../shared/testdata skip where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 ./...
