package main

import (
	// The GGUF model loader installs itself as the pipeline's opener of model files, so that
	// [model] path = "…" and --model FILE load real models.
	_ "github.com/loomlm/loom/model/loader"
	// The embedded models register themselves as [model] builtin = "default" and "draft".
	_ "github.com/loomlm/loom/models"
)
