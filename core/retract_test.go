package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/testmodel"
)

// Text streamed before a Truncate is withdrawn by an event with Retract, so that a client
// applying the events in order holds exactly the final text.
func TestTruncateRetractsStreamedText(t *testing.T) {
	model, tok := testmodel.Default()
	var shown []byte
	retracted := 0
	strat := core.StrategyFunc(func(ctx context.Context, s *core.Session) error {
		q, err := s.Prefill()
		if err != nil {
			return err
		}
		step := func(n int) error {
			for range n {
				if err := s.Forward(q); err != nil {
					return err
				}
				c, err := s.Process(q)
				if err != nil {
					return err
				}
				ch, err := s.Sample(q, c)
				if err != nil {
					return err
				}
				if err := s.Append(q, ch); err != nil {
					return err
				}
			}
			return nil
		}
		if err := step(6); err != nil {
			return err
		}
		if err := s.Truncate(q, q.PromptLen()+2); err != nil {
			return err
		}
		return step(5)
	})
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: strat}
	res, err := core.Generate(context.Background(), p, core.Request{
		Prompt: "the cat", MaxNewTokens: 7, Seed: core.SeedOf(3),
		OnEvent: func(ev core.Event) error {
			if ev.Retract > 0 {
				retracted += ev.Retract
				shown = shown[:len(shown)-ev.Retract]
			}
			shown = append(shown, ev.Text...)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if retracted == 0 {
		t.Fatal("no text was retracted")
	}
	if got := res.Sequences[0].Text; string(shown) != got {
		t.Fatalf("streamed %q, result %q", shown, got)
	}
	if n := len(res.Sequences[0].Tokens); n != 7 {
		t.Fatalf("%d tokens, want 7", n)
	}
}

// A prompt too long for the context is refused before it is encoded, with the sizes.
func TestOversizedPromptRefusedBeforeEncoding(t *testing.T) {
	model, tok := testmodel.Default()
	ctx := model.Config().ContextLength
	if ctx <= 0 {
		t.Fatal("the test model declares no context length")
	}
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: core.StrategyFunc(func(context.Context, *core.Session) error { return nil })}
	limit := core.MaxPromptBytes(p)
	huge := strings.Repeat("x", limit+1)
	_, err := core.NewSession(context.Background(), p, core.Request{Prompt: huge})
	if !errors.Is(err, core.ErrContextFull) || !strings.Contains(err.Error(), fmt.Sprint(limit+1)) {
		t.Fatalf("error %v, want ErrContextFull naming %d bytes", err, limit+1)
	}
}

// EncodePrompt gives the tokens a session takes, whichever way the request carries its
// prompt, and refuses an oversized one as NewSession does.
func TestEncodePromptIsTheSessionsPrompt(t *testing.T) {
	model, tok := testmodel.Default()
	p := &core.Pipeline{Model: model, Tokenizer: tok, Strategy: core.StrategyFunc(func(context.Context, *core.Session) error { return nil })}
	for _, req := range []core.Request{
		{Prompt: "And God said"},
		{Prompt: "And God said", NoSpecial: true},
		{PromptTokens: []core.TokenID{5, 6, 7}},
	} {
		toks, err := core.EncodePrompt(p, &req)
		if err != nil {
			t.Fatal(err)
		}
		s, err := core.NewSession(context.Background(), p, req)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(toks, s.Prompt()) {
			t.Errorf("%+v: EncodePrompt %v, the session's prompt %v", req, toks, s.Prompt())
		}
		// Handing the tokens on gives the session the same prompt.
		again := req
		again.PromptTokens = toks
		s2, err := core.NewSession(context.Background(), p, again)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s2.Prompt(), toks) {
			t.Errorf("%+v with its tokens handed on: the session's prompt %v, want %v", req, s2.Prompt(), toks)
		}
	}
	huge := core.Request{Prompt: strings.Repeat("x", core.MaxPromptBytes(p)+1)}
	if _, err := core.EncodePrompt(p, &huge); !errors.Is(err, core.ErrContextFull) {
		t.Fatalf("oversized prompt: %v, want ErrContextFull", err)
	}
}
