package core_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
)

// A strategy written from the Session's primitives: greedy decoding that backtracks. When the
// token just appended makes the text contain " the ", Truncate takes it back, Forward re-runs
// the last kept token to get its row again, and the next best candidate not yet tried at that
// position is chosen instead.
func ExampleStrategyFunc() {
	model, tok, err := models.Open("default", llama.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer model.Close()
	avoidThe := core.StrategyFunc(func(ctx context.Context, s *core.Session) error {
		q, err := s.Prefill()
		if err != nil {
			return err
		}
		tried := map[int]map[core.TokenID]bool{} // position → tokens taken back there
		for !q.Finished() {
			if err := s.Forward(q); err != nil { // no-op unless a token is pending
				return err
			}
			c, err := s.Process(q)
			if err != nil {
				return err
			}
			pos := len(q.Tokens())
			var keep []core.Candidate
			for _, it := range c.Items() {
				if !tried[pos][it.ID] {
					keep = append(keep, it)
				}
			}
			c.SetItems(keep, false) // a strategy may edit the candidates it was given
			ch, err := s.Greedy(q, c)
			if err != nil {
				return err
			}
			if err := s.Append(q, ch); err != nil {
				return err
			}
			if bytes.Contains(q.Text(), []byte(" the ")) {
				if tried[pos] == nil {
					tried[pos] = map[core.TokenID]bool{}
				}
				tried[pos][ch.ID] = true
				if err := s.Truncate(q, pos); err != nil {
					return err
				}
			}
		}
		return nil
	})
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: avoidThe}
	res, err := core.Generate(context.Background(), p, core.Request{Prompt: "And he said unto", MaxNewTokens: 24})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q\n", res.Sequences[0].Text)
	// Output: " him, I will not be a man of God.\nAnd theThen said he unto him, I will not be"
}
