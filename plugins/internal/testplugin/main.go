// Command testplugin is the plugin the plugins package's tests start: well-behaved parts that
// have built-in equivalents, and misbehaviour chosen by its config (crash, hang, panic, NaN,
// ids outside the vocabulary, junk on stdout and stderr), optionally only once (the first
// process that misbehaves creates the file "once" names, later ones see it and behave).
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/loomlm/loom/sdk"
)

// behaviour is shared by every part of the plugin.
type behaviour struct {
	mode  string // "", crash, hang, panic, nan, bad_id, junk
	after int    // calls before misbehaving
	once  string
	calls int
	vocab int
}

func (b *behaviour) Configure(cfg *sdk.Config) error {
	b.mode = cfg.String("misbehave", "")
	b.after = cfg.Int("after", 0)
	b.once = cfg.String("once", "")
	switch b.mode {
	case "", "crash", "exit", "hang", "panic", "nan", "bad_id", "junk":
	default:
		cfg.Errorf("misbehave", "= %q: unknown misbehaviour", b.mode)
	}
	if b.after < 0 {
		cfg.Errorf("after", "= %d: must not be negative", b.after)
	}
	if b.mode == "junk" {
		junk()
	}
	return nil
}

func junk() {
	fmt.Println("junk on stdout through fmt")
	syscall.Write(1, []byte("junk written to descriptor 1\n"))
	syscall.Write(2, []byte("{\"@message\": 42}\n{\"@level\": [1,2], \"@message\": {\"a\": null}}\nnot json at all \x1b[31mred\x1b[0m\n{\"@message\": \"a proper log line\", \"@level\": \"warn\", \"k\": 1}\n{bad json\n"))
}

// misbehave is called on every call; it reports whether the call must misbehave (for modes
// the caller handles) after doing what it does for the others.
func (b *behaviour) misbehave() bool {
	b.calls++
	if b.mode == "" || b.calls <= b.after {
		return false
	}
	if b.once != "" {
		if _, err := os.Stat(b.once); err == nil {
			return false
		}
		os.WriteFile(b.once, []byte("x"), 0o644)
	}
	switch b.mode {
	case "crash":
		go func() { panic("testplugin: crashing as configured") }()
		time.Sleep(time.Hour)
	case "exit":
		os.Exit(7)
	case "hang":
		time.Sleep(time.Hour)
	case "panic":
		panic("testplugin: panicking as configured")
	case "junk":
		junk()
		return false
	}
	return true
}

func (b *behaviour) UseVocabulary(v *sdk.Vocabulary) error {
	b.vocab = v.Size
	return nil
}

// Scale divides every logit by t (a temperature), rewriting the dense row.
type Scale struct {
	*behaviour
	t float64
}

func (s *Scale) Name() string { return "scale" }
func (s *Scale) Doc() string  { return "Divides the logits by t." }

func (s *Scale) Configure(cfg *sdk.Config) error {
	s.t = cfg.Float("t", 1)
	if s.t <= 0 {
		cfg.Errorf("t", "= %v: must be positive", s.t)
	}
	return nil
}

func (s *Scale) Process(seq *sdk.Sequence, c *sdk.Candidates) error {
	bad := s.misbehave()
	inv := float32(1 / s.t)
	if d := c.Dense(); d != nil {
		for i := range d {
			d[i] *= inv
		}
	} else {
		items := c.Items()
		for i := range items {
			items[i].Logit *= inv
		}
	}
	if bad {
		switch s.mode {
		case "nan":
			if d := c.Dense(); d != nil {
				d[len(d)/2] = float32(math.NaN())
			}
		case "bad_id":
			c.Ban(sdk.TokenID(s.vocab + 5))
		}
	}
	return nil
}

// Ban bans the token ids of its config, reading only the history.
type Ban struct {
	*behaviour
	ids []sdk.TokenID
}

func (b *Ban) Name() string     { return "ban" }
func (b *Ban) Needs() sdk.Needs { return sdk.NeedsHistory }
func (b *Ban) Doc() string      { return "Bans the token ids of config ban." }
func (b *Ban) Configure(cfg *sdk.Config) error {
	v, ok := cfg.Value("ban")
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		cfg.Errorf("ban", "must be a list of token ids")
		return nil
	}
	for _, e := range list {
		f, ok := e.(float64)
		if !ok || f < 0 {
			cfg.Errorf("ban", "must be a list of token ids")
			return nil
		}
		b.ids = append(b.ids, sdk.TokenID(f))
	}
	return nil
}

func (b *Ban) Process(seq *sdk.Sequence, c *sdk.Candidates) error {
	if b.misbehave() && b.mode == "bad_id" {
		c.Ban(sdk.TokenID(b.vocab + 5))
	}
	for _, id := range b.ids {
		c.Ban(id)
	}
	return nil
}

// Top keeps the n most likely candidates and changes nothing else: a top-k.
type Top struct{ *behaviour }

func (t *Top) Name() string     { return "top" }
func (t *Top) Needs() sdk.Needs { return sdk.NeedsTop(5) }
func (t *Top) Process(*sdk.Sequence, *sdk.Candidates) error {
	t.misbehave()
	return nil
}

// StopAfter stops a sequence after n generated tokens with reason "enough".
type StopAfter struct {
	*behaviour
	n int
}

func (s *StopAfter) Name() string { return "stop_after" }
func (s *StopAfter) Configure(cfg *sdk.Config) error {
	s.n = cfg.Int("stop_after", 0)
	return nil
}

func (s *StopAfter) Check(seq *sdk.Sequence) sdk.Stop {
	s.misbehave()
	if s.n > 0 && seq.NumGenerated() >= s.n {
		// The detail shows what the plugin sees of two variables: one of the host's own
		// environment (which it must not see) and one the pipeline gives it.
		return sdk.Stop{Reason: "enough", Detail: fmt.Sprintf("%d tokens; secret=%q given=%q", s.n, os.Getenv("LOOM_TEST_SECRET"), os.Getenv("LOOM_TEST_GIVEN"))}
	}
	return sdk.Stop{}
}

// Greedy is the built-in greedy loop driven over the host's session.
type Greedy struct{ *behaviour }

func (g *Greedy) Name() string { return "greedy" }
func (g *Greedy) Decode(ctx context.Context, s *sdk.Session) error {
	seqs, err := s.Start(s.Request().N)
	if err != nil {
		return err
	}
	for {
		var live []*sdk.Sequence
		for _, q := range seqs {
			if !q.Finished() {
				live = append(live, q)
			}
		}
		if len(live) == 0 {
			return nil
		}
		g.misbehave()
		if err := s.StepGreedy(live...); err != nil {
			return err
		}
	}
}

func main() {
	b := &behaviour{}
	sdk.Serve(&Scale{behaviour: b}, &Ban{behaviour: b}, &Top{behaviour: b}, &StopAfter{behaviour: b}, &Greedy{behaviour: b})
}
