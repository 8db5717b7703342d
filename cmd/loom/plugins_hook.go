package main

import (
	"io"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/plugins"
)

// startPlugins starts the plugins a pipeline declares (pipeline.Options.StartPlugins). Their
// logs go to standard error under "plugin.<name>", at the level of LOOM_LOG (trace, debug,
// info — the default —, warn, error or off).
var startPlugins = func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error) {
	return plugins.Starter(pluginOptions())(spec, reg)
}

func pluginOptions() plugins.Options {
	level := hclog.Info
	if v := os.Getenv("LOOM_LOG"); v != "" {
		if l := hclog.LevelFromString(strings.ToLower(v)); l != hclog.NoLevel {
			level = l
		}
	}
	return plugins.Options{
		Logger: hclog.New(&hclog.LoggerOptions{Name: "loom", Output: os.Stderr, Level: level}),
	}
}
