package batch_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
	"github.com/loomlm/loom/server/batch"
)

// Two sessions forward at the same time through one batching wrapper: their calls run as one
// batched forward, and each gets exactly the logits it gets alone.
func ExampleModel() {
	m, _, err := models.Open("default", llama.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	steps := 0
	// Both sessions join first, so the step runs as soon as both have called (the window only
	// bounds the wait for a session that does not call).
	bm := batch.New(m, batch.Options{Window: time.Minute, OnStep: func(batch.Step) { steps++ }})
	defer bm.Close()

	prompts := [][]core.TokenID{{10, 20, 30}, {40, 50}}
	rows := make([][]float32, len(prompts))
	var wg sync.WaitGroup
	leaves := []func(){bm.Join(), bm.Join()} // sessions join before they start forwarding
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer leaves[i]()
			st, _ := bm.NewState()
			defer st.Close()
			items := []core.ForwardItem{{State: st, Tokens: p}}
			if err := bm.Forward(context.Background(), items); err != nil {
				fmt.Println(err)
				return
			}
			rows[i] = slices.Clone(items[0].Logits[0])
		}()
	}
	wg.Wait()

	alone, _ := m.NewState()
	defer alone.Close()
	items := []core.ForwardItem{{State: alone, Tokens: prompts[1]}}
	if err := m.Forward(context.Background(), items); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("batched steps:", steps)
	fmt.Println("same logits as alone:", slices.Equal(rows[1], items[0].Logits[0]))
	// Output:
	// batched steps: 1
	// same logits as alone: true
}
