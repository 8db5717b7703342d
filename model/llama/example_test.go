package llama_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
)

// tinyModel writes a small random-weight model and returns its path.
func tinyModel() (string, func()) {
	dir, err := os.MkdirTemp("", "llama-example")
	if err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer
	if err := llama.WriteSynthetic(&buf, llama.Shapes["tiny"], "q8_0", 1); err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "tiny.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	return path, func() { os.RemoveAll(dir) }
}

// Open a model, prefill a prompt, then decode greedily one token per forward pass; the KV
// cache makes each step cost one token.
func Example() {
	path, cleanup := tinyModel()
	defer cleanup()
	m, err := llama.Open(path, llama.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	st, _ := m.NewState()
	defer st.Close()
	batch := []core.ForwardItem{{State: st, Tokens: []int32{1, 300, 301, 302}}}
	for step := 0; step < 5; step++ {
		if err := m.Forward(context.Background(), batch); err != nil {
			log.Fatal(err)
		}
		logits := batch[0].Logits[0]
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		batch[0].Tokens = []int32{int32(best)}
	}
	p := m.Params()
	fmt.Printf("%s: %d layers, %d heads (%d for keys and values), %d positions cached\n", p.Architecture, p.Layers, p.Heads, p.KVHeads, st.Len())
	fmt.Printf("KV cache: %d bytes per position\n", m.Cache().BytesPerToken())
	// Output:
	// llama: 2 layers, 4 heads (2 for keys and values), 8 positions cached
	// KV cache: 1024 bytes per position
}

// A batched forward advances several sequences at once, each by its own tokens; sequences
// forked from one prompt share its cached keys and values.
func ExampleModel_Forward() {
	path, cleanup := tinyModel()
	defer cleanup()
	m, err := llama.Open(path, llama.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	root, _ := m.NewState()
	defer root.Close()
	prompt := []core.ForwardItem{{State: root, Tokens: []int32{1, 300, 301, 302, 303}}}
	if err := m.Forward(context.Background(), prompt); err != nil {
		log.Fatal(err)
	}
	a, _ := root.Fork()
	b, _ := root.Fork()
	defer a.Close()
	defer b.Close()
	batch := []core.ForwardItem{
		{State: a, Tokens: []int32{10}},
		{State: b, Tokens: []int32{11, 12, 13}, AllLogits: true}, // a row per token, for verification
	}
	if err := m.Forward(context.Background(), batch); err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Len(), len(batch[0].Logits), b.Len(), len(batch[1].Logits))
	// Output:
	// 6 1 8 3
}
