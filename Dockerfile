# loom serve in a container: a static binary (no cgo) on a distroless base, run as non-root.
# It serves the embedded default model and the example pipelines on port 8080; mount GGUF files
# and pipeline files and pass them as arguments to serve your own (see docs/serving.md).
#
#   docker build -t loom .
#   docker run --rm -p 8080:8080 loom
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY sdk/go.mod sdk/go.sum ./sdk/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/loom ./cmd/loom

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/loom /loom
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/loom", "serve", "--addr", "0.0.0.0:8080"]
