package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/loomlm/loom/internal/fixtures"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// closeCounter is the io.Closer a StartPlugins hook returns: it counts its Close calls.
type closeCounter struct{ n *int }

func (c closeCounter) Close() error { *c.n++; return nil }

// TestAddReleasesWhatAFailedAddStarted adds pipelines that fail after the server started their
// plugins or opened their models: the plugins are stopped and the models dropped at once (a
// later pipeline on the same file opens it again), while what loaded pipelines use stays.
func TestAddReleasesWhatAFailedAddStarted(t *testing.T) {
	dir := t.TempDir()
	tiny := fixtures.Path(t, "qwen3", "tinyqwen3-f32.gguf") // a vocabulary of 272 tokens
	var logs bytes.Buffer
	started, closed := 0, 0
	s := server.New(server.Options{ReserveKV: true, MaxRunning: 1,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info}),
		StartPlugins: func(*pipeline.Spec, *pipeline.Registry) (io.Closer, error) {
			started++
			return closeCounter{&closed}, nil
		}})
	add := func(name, src string) error {
		file := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		spec, err := pipeline.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		return s.Add(name, spec)
	}
	opened := func() int { return strings.Count(logs.String(), "model="+tiny) }

	if err := add("greedy", "[model]\nbuiltin = \"default\"\n"); err != nil {
		t.Fatal(err)
	}
	// The tiny file's vocabulary is not the default model's: the speculative pipeline fails
	// after its draft model was opened.
	err := add("speculative", "[model]\nbuiltin = \"default\"\n[draft_model]\npath = \""+tiny+"\"\n[strategy]\ntype = \"speculative\"\n")
	if err == nil || opened() != 1 {
		t.Fatalf("Add = %v, the fixture opened %d times: want an error after opening it once\n%s", err, opened(), logs.String())
	}
	// A pipeline with a plugin and a part no registry has: its plugin is stopped.
	err = add("plugged", "[model]\nbuiltin = \"default\"\n[[plugins]]\nname = \"p\"\npath = \"p\"\nsha256 = \"00\"\n[[processors]]\ntype = \"p.nothing\"\n")
	if err == nil || started != 1 || closed != 1 {
		t.Fatalf("Add = %v, plugins started %d, closed %d: want an error, the plugin started and closed once", err, started, closed)
	}
	if got := s.Names(); !slices.Equal(got, []string{"greedy"}) {
		t.Fatalf("pipelines %v, want [greedy]", got)
	}
	// The draft was dropped: a pipeline on the file opens it again.
	if err := add("tiny", "[model]\npath = \""+tiny+"\"\n"); err != nil {
		t.Fatal(err)
	}
	if opened() != 2 {
		t.Fatalf("the fixture opened %d times, want 2: the failed Add kept it\n%s", opened(), logs.String())
	}
	// The default model the failed pipelines shared with greedy is still served.
	if n := strings.Count(logs.String(), "model=\"builtin default\""); n != 1 {
		t.Fatalf("the default model opened %d times, want 1\n%s", n, logs.String())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestServerRegistersNoModels checks that a server hands its shared models to its pipelines
// itself: the process-wide list of embedded models is the same before, while and after it
// serves.
func TestServerRegistersNoModels(t *testing.T) {
	before := pipeline.BuiltinModels()
	s, hs := newServer(t, server.Options{})
	if got := pipeline.BuiltinModels(); !slices.Equal(got, before) {
		t.Fatalf("embedded models %v while serving, want %v", got, before)
	}
	hs.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := pipeline.BuiltinModels(); !slices.Equal(got, before) {
		t.Fatalf("embedded models %v after Close, want %v", got, before)
	}
}

// TestAfterClose uses a server after its Close: requests get 503 server_closed instead of
// reaching the closed models, /health still answers, and Add fails.
func TestAfterClose(t *testing.T) {
	s, hs := newServer(t, server.Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c := client(hs)
	_, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "greedy",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}, MaxTokens: openai.Int(4)})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable || ae.Code != "server_closed" {
		t.Fatalf("completion after Close: %v, want 503 server_closed", err)
	}
	if code := get(t, hs.URL+"/health"); code != http.StatusOK {
		t.Fatalf("/health after Close: %d", code)
	}
	if code := get(t, hs.URL+"/ready"); code != http.StatusServiceUnavailable {
		t.Fatalf("/ready after Close: %d", code)
	}
	spec, err := pipeline.Load(examplePath("greedy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add("again", spec); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Add after Close: %v, want an error saying the server is closed", err)
	}
}
