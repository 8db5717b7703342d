#!/usr/bin/env bash
# Regenerates the plugin protocol's code from the .proto files in this directory:
#   Go:     ../pluginpb/*.pb.go           (protoc-gen-go, protoc-gen-go-grpc)
#   Python: ../python/*_pb2.py, *_pb2_grpc.py  (protoc's python output, grpc_python_plugin)
# It installs what it needs: protoc and the gRPC Python plugin from Debian's packages (when
# missing; needs root or sudo) and the Go generators, pinned, from the Go module proxy into
# .cache/bin of the repository. Run it after changing a .proto file and commit the output.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

need_apt=()
command -v protoc >/dev/null || need_apt+=(protobuf-compiler)
command -v grpc_python_plugin >/dev/null || need_apt+=(protobuf-compiler-grpc)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}"
fi

bin="$root/.cache/bin"
mkdir -p "$bin"
GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

cd "$here"
PATH="$bin:$PATH" protoc -I . \
  --go_out=../pluginpb --go_opt=paths=source_relative \
  --go-grpc_out=../pluginpb --go-grpc_opt=paths=source_relative \
  loom_plugin.proto
protoc -I . \
  --python_out=../python \
  --grpc_python_out=../python --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
  loom_plugin.proto go_plugin.proto health.proto
echo "generated: sdk/pluginpb, sdk/python"
