#!/usr/bin/env bash
# The project's test command: formatting, vet, and every test with the race detector.
# Run from anywhere; it works on a fresh machine with Go installed (modules come from the
# module proxy). Tests that need ../shared/testdata skip where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

# Plugins: the Python example plugin runs on Debian's python3-grpcio and python3-protobuf
# (/usr/bin/python3). Install them when missing and possible (CI runs as root); without them
# the Python plugin's test skips and says why.
echo "== plugin prerequisites"
if ! /usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-grpcio python3-protobuf >/dev/null
  else
    echo "python3-grpcio and python3-protobuf are missing and cannot be installed here: the Python plugin test will skip"
  fi
fi

# sdk/ is its own Go module (what plugin authors import): ./... from the root does not reach it.
echo "== sdk module: go vet, go test -race"
(cd sdk && go vet ./... && go test -race -count=1 ./...)

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 ./...
