#!/usr/bin/env bash
# The project's test command: formatting, vet, and every test with the race detector.
# Run from anywhere; it works on a fresh machine with Go installed (modules come from the
# module proxy). The tests' fixtures are in the repository (testdata/), so every test runs:
# a skipped test fails this command unless its reason is one of the machine-dependent ones
# listed below (scripts/testreport prints every skip with its reason).
set -euo pipefail
cd "$(dirname "$0")/.."

# Skip reasons that depend on the machine, not on the repository:
allowed_skips=(
  # no AVX2/FMA/F16C on this CPU, or -tags purego: the assembly kernels do not exist
  'no assembly kernels on this CPU or build'
  'the pure-Go kernels allocate their float row buffer'
  # /proc/cpuinfo exists on Linux only
  '/proc/cpuinfo flags are compared on linux/amd64 only'
  # opt-in tools that print samples or need files outside the repository
  ': set LOOM_[A-Z0-9_]+=1 to '
)

# Plugins: the Python example plugin runs on Debian's python3-grpcio and python3-protobuf
# (/usr/bin/python3). Install them when missing and possible (CI runs as root); without them
# the Python plugin's test skips, and this command fails saying so.
echo "== plugin prerequisites"
if ! /usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-grpcio python3-protobuf >/dev/null
  else
    echo "python3-grpcio and python3-protobuf are missing and cannot be installed here: the Python plugin test will skip and this command will fail"
  fi
fi

# The workbench's browser test drives Debian's Chromium (with playwright-core, installed by the
# test from its committed lockfile). Install it when missing and possible.
echo "== browser test prerequisites"
if ! command -v chromium >/dev/null && [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing and cannot be installed here: the workbench browser test will fail"
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/testreport" ./scripts/testreport
report() {
  local args=()
  for re in "${allowed_skips[@]}"; do args+=(-allow-skip "$re"); done
  "$tmp/testreport" "${args[@]}"
}

# sdk/ is its own Go module (what plugin authors import): ./... from the root does not reach it.
echo "== sdk module: go vet, go test -race"
(cd sdk && go vet ./... && go test -race -count=1 -json ./...) | report

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

# The workbench's browser test measures how the page keeps up with a streamed run (renderings,
# the longest main-thread task): it runs alone after the others, since packages tested in
# parallel on a 2-core machine starve the browser and make those figures say nothing.
echo "== go test -race"
go test -race -count=1 -json -skip '^TestWorkbenchInBrowser$' ./... | report
echo "== go test -race: the workbench in a browser, alone"
go test -race -count=1 -json -run '^TestWorkbenchInBrowser$' ./cmd/loom | report
