package processors_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/loomlm/loom/pipeline"
)

// Every TOML snippet of docs/processors.md builds on the test model: the porting examples and
// the order key mean what the page says they mean, with the parameters it names.
func TestProcessorsDocSnippetsBuild(t *testing.T) {
	src, err := os.ReadFile("../docs/processors.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllSubmatch(src, -1)
	if len(blocks) < 3 {
		t.Fatalf("found %d TOML snippets in docs/processors.md, want at least 3", len(blocks))
	}
	for i, b := range blocks {
		// Top-level keys (order) come first in a snippet, so the model table goes last.
		text := string(b[1]) + "\n[model]\nbuiltin = \"test\"\n"
		spec, err := pipeline.Parse("processors.md", []byte(text))
		if err != nil {
			t.Errorf("snippet %d: %v\n%s", i, err, b[1])
			continue
		}
		built, err := pipeline.Build(spec, pipeline.Options{})
		if err != nil {
			t.Errorf("snippet %d: %v\n%s", i, err, b[1])
			continue
		}
		built.Close()
	}
}
