#!/usr/bin/env bash
# Builds the example plugins into bin/plugins/ (or the directory given) and writes there a
# ready copy of each example's pipeline.toml with the binary's sha256 filled in:
#   examples/plugins/build.sh && loom run bin/plugins/banwords.toml --prompt "And it came to pass"
# The Python example needs /usr/bin/python3 with Debian's python3-grpcio and python3-protobuf.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/bin/plugins}"
mkdir -p "$out"
chmod go-w "$out"
cd "$root"

finish() { # name binary
  local sum
  sum=$(sha256sum "$out/$2" | cut -d' ' -f1)
  sed "s/^sha256 = .*/sha256 = \"$sum\"/" "examples/plugins/$1/pipeline.toml" > "$out/$1.toml"
  echo "built $out/$2 and $out/$1.toml"
}

for name in banwords regexstop nbest; do
  go build -o "$out/$name" "./examples/plugins/$name"
  chmod 755 "$out/$name"
  finish "$name" "$name"
done

if /usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null; then
  stage=$(mktemp -d)
  cp sdk/python/*.py "$stage/"
  cp examples/plugins/pyrepetition/plugin.py "$stage/__main__.py"
  /usr/bin/python3 -m zipapp "$stage" -p /usr/bin/python3 -o "$out/pyrepetition.pyz"
  rm -rf "$stage"
  chmod 755 "$out/pyrepetition.pyz"
  finish pyrepetition pyrepetition.pyz
else
  echo "skipped pyrepetition: /usr/bin/python3 lacks grpc or protobuf (apt-get install python3-grpcio python3-protobuf)" >&2
fi
