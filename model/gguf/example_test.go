package gguf_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/loomlm/loom/model/ggml"
	"github.com/loomlm/loom/model/gguf"
)

// Write a small GGUF file in memory, read it back and look at its metadata and a tensor.
// Files on disk are read with gguf.Open, which memory-maps them.
func Example() {
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("llama.context_length", uint32(2048))
	w.Set("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>"})
	w.AddTensor("output_norm.weight", ggml.F16, []uint64{2}, []byte{0x00, 0x3c, 0x00, 0xc0}) // 1, -2
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		log.Fatal(err)
	}

	f, err := gguf.Read(buf.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	ctx, _ := f.ArchUint32("context_length")
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	norm, _ := f.TensorFloat32("output_norm.weight")
	fmt.Println(ctx, tokens, norm)
	_, err = f.Uint32("llama.block_count")
	fmt.Println(err)
	// Output:
	// 2048 [<unk> <s> </s>] [1 -2]
	// gguf: metadata key "llama.block_count": not found
}
