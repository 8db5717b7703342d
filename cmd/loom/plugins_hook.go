package main

import (
	"io"

	"github.com/loomlm/loom/pipeline"
)

// startPlugins starts the plugins a pipeline declares. Until the plugin host is wired in, a
// pipeline that declares plugins is refused with a clear error by pipeline.Build.
var startPlugins func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error)
