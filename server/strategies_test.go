package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server"
	"github.com/openai/openai-go/v3"
)

// TestEveryExamplePipelineBatched serves every example pipeline (sampling, greedy, beam
// search, speculative decoding, prompt lookup, DRY/XTC, penalties) and runs two requests on
// each, all at once, so their forwards are batched together; every answer must equal the same
// request run alone with loom run's settings.
func TestEveryExamplePipelineBatched(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "pipelines", "*.toml"))
	if err != nil || len(files) < 8 {
		t.Fatalf("example pipelines: %v, %v", files, err)
	}
	s := server.New(server.Options{MaxRunning: 2 * len(files)})
	defer s.Close()
	type job struct {
		name   string
		seed   uint64
		prompt string
		want   []string
		tokens int // in the returned sequences
	}
	var jobs []*job
	for _, f := range files {
		if err := s.Load(f); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".toml")
		for k := range 2 {
			j := &job{name: name, seed: uint64(20 + k), prompt: []string{"And it came to pass", "The whale"}[k]}
			res := direct(t, name, j.prompt, pipeline.Overrides{}, j.seed, 10)
			for _, sq := range res.Sequences {
				j.want = append(j.want, sq.Text)
				j.tokens += len(sq.Tokens)
			}
			jobs = append(jobs, j)
		}
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := client(hs)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(j.name),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(j.prompt)}, Seed: openai.Int(int64(j.seed)), MaxTokens: openai.Int(10)})
			if err != nil {
				t.Errorf("%s: %v", j.name, err)
				return
			}
			var got []string
			for _, ch := range res.Choices {
				got = append(got, ch.Text)
			}
			if res.Usage.CompletionTokens != int64(j.tokens) {
				t.Errorf("%s: usage counts %d completion tokens, the choices have %d", j.name, res.Usage.CompletionTokens, j.tokens)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", j.want) {
				t.Errorf("%s seed %d: served %q, alone %q", j.name, j.seed, got, j.want)
			}
		}()
	}
	wg.Wait()
}

// TestBeamN asks the beam pipeline (four beams, two returned) for n choices: n = 3 returns the
// best three, and n = 5, more than its beams, is a 400 naming n.
func TestBeamN(t *testing.T) {
	s := server.New(server.Options{})
	defer s.Close()
	if err := s.Load(filepath.Join("..", "pipelines", "beam.toml")); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := client(hs)
	ask := func(n int64) (*openai.Completion, error) {
		return c.Completions.New(context.Background(), openai.CompletionNewParams{Model: "beam",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And it came to pass")}, N: openai.Int(n), MaxTokens: openai.Int(6)})
	}
	res, err := ask(3)
	if err != nil || len(res.Choices) != 3 {
		t.Fatalf("n = 3: %v, %d choices", err, len(res.Choices))
	}
	_, err = ask(5)
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != "n" || !strings.Contains(ae.Message, "at most num_beams = 4") {
		t.Fatalf("n = 5: %v, want 400 naming n", err)
	}
}

// TestShortDraftContext: a speculative pipeline whose draft model holds fewer positions than
// its target drafts while the draft has room and then lets the target go on alone: a prompt
// longer than the draft's context gets the target's greedy text, where the draft's forward
// used to fail the request.
func TestShortDraftContext(t *testing.T) {
	draft := filepath.Join(filepath.Dir(withTemplateFrom(t, "../models/draft.gguf", "draft", "", map[string]any{"llama.context_length": uint32(64)})), "m.gguf")
	dir := t.TempDir()
	spec := filepath.Join(dir, "speculative.toml")
	os.WriteFile(spec, []byte(fmt.Sprintf("[model]\nbuiltin = \"default\"\n[draft_model]\npath = %q\n[strategy]\ntype = \"speculative\"\nk = 3\ngreedy = true\n", draft)), 0o644)
	_, hs := serve(t, spec, examplePath("greedy"))
	c := client(hs)
	for _, words := range []int{4, 40} { // within the draft's context, and past it
		prompt := strings.Repeat("And God said, Let there be light: and there was light. ", words/4)
		texts := map[string]string{}
		for _, model := range []string{"speculative", "greedy"} {
			res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(40)})
			if err != nil {
				t.Fatalf("%s, %d words: %v", model, words, err)
			}
			texts[model] = res.Choices[0].Text
		}
		if texts["speculative"] != texts["greedy"] {
			t.Errorf("%d words: speculative %q, greedy %q", words, texts["speculative"], texts["greedy"])
		}
	}
}
