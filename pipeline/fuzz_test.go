package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// FuzzParseBuild parses arbitrary text as a pipeline file and builds what parses on the test
// model: every problem is an error, never a panic, and a pipeline that builds generates. The
// seeds are the example pipelines, their models replaced by the test model.
func FuzzParseBuild(f *testing.F) {
	files, err := filepath.Glob("../pipelines/*.toml")
	if err != nil || len(files) == 0 {
		f.Fatalf("example pipelines: %v", err)
	}
	models := regexp.MustCompile(`(?m)^(builtin|path) = .*$`)
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(models.ReplaceAllString(string(b), `builtin = "test"`))
	}
	f.Fuzz(func(t *testing.T, src string) {
		spec, err := pipeline.Parse("fuzz.toml", []byte(src))
		if err != nil {
			return
		}
		b, err := pipeline.Build(spec, pipeline.Options{})
		if err != nil {
			return
		}
		defer b.Close()
		req := b.Request("the cat")
		req.MaxNewTokens = min(req.MaxNewTokens, 8)
		req.N = min(req.N, 2)
		if _, err := core.Generate(context.Background(), b.Pipeline, req); err != nil && err == context.Canceled {
			t.Fatal(err)
		}
	})
}
