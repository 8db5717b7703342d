package main

// The GGUF model loader installs itself as the pipeline's opener of model files, so that
// [model] path = "…" and --model FILE load real models.
import _ "github.com/loomlm/loom/model/loader"
