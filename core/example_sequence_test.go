package core_test

import (
	"fmt"

	"github.com/loomlm/loom/core"
)

// NewSequence lets a processor be tried without a model or a Session: here a processor that
// bans every token already generated.
func ExampleNewSequence() {
	noRepeat := core.ProcessorFunc(func(q *core.Sequence, c *core.Candidates) error {
		for _, id := range q.Generated() {
			c.Dense()[id] = float32(-1e30)
		}
		return nil
	})
	q, err := core.NewSequence([]core.TokenID{7, 1, 3}, 1, core.SequenceOptions{}) // prompt [7], generated [1 3]
	if err != nil {
		fmt.Println(err)
		return
	}
	c := core.NewCandidates([]float32{0.5, 2, 0.1, 3, 1})
	if err := noRepeat.Process(q, c); err != nil {
		fmt.Println(err)
		return
	}
	best, _ := c.Argmax()
	fmt.Println(q.Generated(), best)
	// Output: [1 3] 4
}
