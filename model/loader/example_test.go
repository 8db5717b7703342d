package loader_test

import (
	"context"
	"fmt"
	"log"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/model/loader"
)

// Load a GGUF file and run a forward pass over an encoded prompt.
func ExampleLoad() {
	m, tok, err := loader.Load("stories260K-f32.gguf", llama.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	ids, err := tok.Encode("Once upon a time", core.EncodeOptions{AddSpecial: true})
	if err != nil {
		log.Fatal(err)
	}
	st, _ := m.NewState()
	defer st.Close()
	batch := []core.ForwardItem{{State: st, Tokens: ids}}
	if err := m.Forward(context.Background(), batch); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(batch[0].Logits[0]), "logits")
}
