package models

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/strategies"
)

// reference is a greedy continuation written by the trainer (models/recipe/train.py) at export.
type reference struct {
	prompt       string
	promptIDs    []core.TokenID
	continuation []core.TokenID
	text         string
}

// readReferences reads the records of a testdata/*.greedy.txt file: "key: value" lines, records
// separated by blank lines, comments starting with #.
func readReferences(t *testing.T, path string) []reference {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := func(s string) []core.TokenID {
		var out []core.TokenID
		for _, w := range strings.Fields(s) {
			n, err := strconv.Atoi(w)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, core.TokenID(n))
		}
		return out
	}
	var refs []reference
	var r *reference
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") {
			continue
		}
		if text == "" {
			r = nil
			continue
		}
		if r == nil {
			refs = append(refs, reference{})
			r = &refs[len(refs)-1]
		}
		key, value, ok := strings.Cut(text, ": ")
		if !ok {
			t.Fatalf("%s:%d: bad line %q", path, line, text)
		}
		switch key {
		case "prompt":
			err = json.Unmarshal([]byte(value), &r.prompt)
		case "prompt_ids":
			r.promptIDs = ids(value)
		case "continuation_ids":
			r.continuation = ids(value)
		case "continuation":
			err = json.Unmarshal([]byte(value), &r.text)
		}
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, line, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for i, r := range refs {
		if r.prompt == "" || len(r.promptIDs) == 0 || len(r.continuation) == 0 {
			t.Fatalf("%s: record %d is incomplete", path, i+1)
		}
	}
	if len(refs) == 0 {
		t.Fatalf("%s: no records", path)
	}
	return refs
}

func openBuiltin(t *testing.T, name string) (core.Model, core.Tokenizer) {
	t.Helper()
	m, tok, closer, err := pipeline.OpenModel(pipeline.ModelSpec{Builtin: name}, "")
	if err != nil {
		t.Fatal(err)
	}
	if closer != nil {
		t.Cleanup(func() { closer.Close() })
	}
	return m, tok
}

// The export is faithful: loom's tokenizer encodes the prompt as the trainer did, and loom's
// greedy continuation equals the trainer's token for token.
func TestGreedyMatchesTrainer(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			m, tok := openBuiltin(t, name)
			p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
			for _, ref := range readReferences(t, "testdata/"+name+".greedy.txt") {
				res, err := core.Generate(context.Background(), p, core.Request{
					Prompt: ref.prompt, MaxNewTokens: len(ref.continuation), Seed: core.SeedOf(1),
				})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(res.PromptTokens, ref.promptIDs) {
					t.Errorf("prompt %q encodes to %v, the trainer's tokenizer gave %v", ref.prompt, res.PromptTokens, ref.promptIDs)
					continue
				}
				got := res.Sequences[0].Tokens
				for i := range ref.continuation {
					if i >= len(got) || got[i] != ref.continuation[i] {
						t.Errorf("greedy continuation of %q differs from the trainer's at token %d:\n got  %v\n want %v\n got text  %q\n want text %q",
							ref.prompt, i, got, ref.continuation, res.Sequences[0].Text, ref.text)
						break
					}
				}
				if res.Sequences[0].Text != ref.text {
					t.Errorf("%q: text %q, the trainer decoded %q", ref.prompt, res.Sequences[0].Text, ref.text)
				}
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	names := pipeline.BuiltinModels()
	for _, n := range Names() {
		if !slices.Contains(names, n) {
			t.Errorf("builtin model %q not registered (have %v)", n, names)
		}
	}
	if _, _, err := Open("nope", llama.Options{}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Open(nope): %v", err)
	}
}

// The two models share one tokenizer, as speculative decoding needs.
func TestSameTokenizer(t *testing.T) {
	_, target := openBuiltin(t, "default")
	_, draft := openBuiltin(t, "draft")
	ts, ds := target.Special(), draft.Special()
	if target.VocabSize() != draft.VocabSize() || ts.BOS != ds.BOS || ts.EOS != ds.EOS || !slices.Equal(ts.EndOfGeneration, ds.EndOfGeneration) {
		t.Fatalf("vocabularies differ: %d %+v, %d %+v", target.VocabSize(), target.Special(), draft.VocabSize(), draft.Special())
	}
	for id := range target.VocabSize() {
		if a, b := target.Piece(core.TokenID(id)), draft.Piece(core.TokenID(id)); a != b {
			t.Fatalf("token %d: %q in the target, %q in the draft", id, a, b)
		}
	}
	text := "In the beginning God created the heaven and the earth. Call me Ishmael; 1,000 ships -- \"whales\"!"
	ids, err := target.Encode(text, core.EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := target.Decode(ids); got != text {
		t.Errorf("round trip: %q", got)
	}
}

func TestOptions(t *testing.T) {
	_, _, _, err := pipeline.OpenModel(pipeline.ModelSpec{Builtin: "default", Options: map[string]any{"no_such": 1}}, "")
	if err == nil || !strings.Contains(err.Error(), "no_such") {
		t.Errorf("unknown option accepted: %v", err)
	}
	m, _, closer, err := pipeline.OpenModel(pipeline.ModelSpec{Builtin: "draft", Options: map[string]any{"kv_type": "f16"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if m.Config().VocabSize != 4096 {
		t.Errorf("vocabulary %d", m.Config().VocabSize)
	}

	// mmap = false: the weights are a copy in the process's memory, and give the same tokens.
	inPlace, tok := openBuiltin(t, "default")
	copied, _, copyCloser, err := pipeline.OpenModel(pipeline.ModelSpec{Builtin: "default", Options: map[string]any{"mmap": false}}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer copyCloser.Close()
	f := copied.(*llama.Model).File()
	data, err := f.TensorData(f.Tensors[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	embedded := GGUF("default")
	start := uintptr(unsafe.Pointer(unsafe.SliceData(embedded)))
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(data))); p >= start && p < start+uintptr(len(embedded)) {
		t.Error("mmap = false: the weights are still read in place")
	}
	var texts []string
	for _, m := range []core.Model{inPlace, copied} {
		p := &core.Pipeline{Model: m, Tokenizer: tok, Strategy: strategies.Greedy{}}
		res, err := core.Generate(context.Background(), p, core.Request{Prompt: "Call me Ishmael.", MaxNewTokens: 16, Seed: core.SeedOf(1)})
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, res.Sequences[0].Text)
	}
	if texts[0] != texts[1] {
		t.Errorf("mmap = false gave %q, in place %q", texts[1], texts[0])
	}
}
