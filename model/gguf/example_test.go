package gguf_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"path/filepath"

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

// Read a file into memory of the process's own instead of mapping it (as llama.cpp's
// --no-mmap): on Linux on transparent huge pages, which weights streamed by every forward pass
// read faster through. The progress function sees the bytes read so far.
func ExampleReadFile() {
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	w.AddTensor("output_norm.weight", ggml.F32, []uint64{2}, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}) // 1, 2
	path := filepath.Join(os.TempDir(), "loom-example-readfile.gguf")
	if err := w.WriteFile(path); err != nil {
		log.Fatal(err)
	}
	defer os.Remove(path)

	var read, total int64
	f, err := gguf.ReadFile(path, func(done, size int64) { read, total = done, size })
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	norm, _ := f.TensorFloat32("output_norm.weight")
	fmt.Println(norm, read == total)
	// Output:
	// [1 2] true
}
