package strategies_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/processors"
	"github.com/loomlm/loom/strategies"
	"github.com/loomlm/loom/testmodel"
)

// replayLineage rebuilds every sequence's generated tokens from a result's lineage and checks
// each event against the rebuilt state: a fork starts from its parent's tokens, appends and
// truncates give the recorded lengths, a verification is followed by appends, and every output
// equals the returned sequence. It returns the tokens each verification proposed with how many
// of them the next appends kept.
func replayLineage(t *testing.T, res *core.Result) (verified, kept int) {
	t.Helper()
	seqs := map[int][]core.TokenID{}
	done := map[int]bool{}
	var pending []core.TokenID // the last verification's tokens still to be matched
	pendingSeq := -1
	outputs := 0
	for i, ev := range res.Lineage {
		cur, ok := seqs[ev.Seq]
		if ev.Op != core.LineageStart && ev.Op != core.LineageFork && !ok {
			t.Fatalf("event %d %+v: sequence %d never started", i, ev, ev.Seq)
		}
		if done[ev.Seq] && ev.Op != core.LineageOutput {
			t.Fatalf("event %d %+v: sequence %d was discarded", i, ev, ev.Seq)
		}
		switch ev.Op {
		case core.LineageStart:
			seqs[ev.Seq] = nil
		case core.LineageFork:
			parent, ok := seqs[ev.Parent]
			if !ok {
				t.Fatalf("event %d: fork of unknown sequence %d", i, ev.Parent)
			}
			seqs[ev.Seq] = slices.Clone(parent)
		case core.LineageAppend:
			seqs[ev.Seq] = append(cur, ev.Tokens[0])
			if pendingSeq == ev.Seq && len(pending) > 0 {
				if pending[0] == ev.Tokens[0] {
					kept++
					pending = pending[1:]
				} else {
					pending = nil
				}
			}
		case core.LineageTruncate:
			if ev.Len > len(cur) {
				t.Fatalf("event %d: truncate to %d of %d tokens", i, ev.Len, len(cur))
			}
			seqs[ev.Seq] = cur[:ev.Len]
		case core.LineageVerify:
			verified += len(ev.Tokens)
			pending, pendingSeq = slices.Clone(ev.Tokens), ev.Seq
		case core.LineageDiscard:
			done[ev.Seq] = true
		case core.LineageOutput:
			if got, want := seqs[ev.Seq], res.Sequences[ev.Index].Tokens; !slices.Equal(got, want) {
				t.Fatalf("output %d (sequence %d): lineage gives %v, result has %v", ev.Index, ev.Seq, got, want)
			}
			outputs++
		}
		if ev.Op != core.LineageVerify && len(seqs[ev.Seq]) != ev.Len {
			t.Fatalf("event %d %+v: sequence has %d tokens", i, ev, len(seqs[ev.Seq]))
		}
	}
	if outputs != len(res.Sequences) {
		t.Fatalf("%d output events for %d sequences", outputs, len(res.Sequences))
	}
	return verified, kept
}

// TestLineageReplaysEveryStrategy checks, for every built-in strategy, that the recorded
// lineage rebuilds the returned sequences, that beam search's pruned beams appear as discards
// and that speculation's verifications account for its accepted drafts.
func TestLineageReplaysEveryStrategy(t *testing.T) {
	m, tok := testmodel.Default()
	temp, err := processors.NewTemperature(0.8)
	if err != nil {
		t.Fatal(err)
	}
	req := core.Request{Prompt: "the cat sat on the mat and the cat sat on", MaxNewTokens: 24, IgnoreEOS: true,
		Seed: core.SeedOf(5), Return: core.ReturnOptions{Lineage: true}}
	for _, c := range []struct {
		name  string
		st    core.Strategy
		procs []core.LogitsProcessor
		n     int
	}{
		{"greedy", strategies.Greedy{}, nil, 1},
		{"sampling n=3", strategies.Ancestral{}, []core.LogitsProcessor{temp}, 3},
		{"beam 4", mustBeam(t, strategies.BeamConfig{NumBeams: 4, NumReturn: 2}), nil, 1},
		{"speculative", mustSpec(t, strategies.SpeculativeConfig{Draft: draftFor(9), K: 4, Greedy: true}), nil, 1},
		{"prompt lookup", mustSpec(t, strategies.SpeculativeConfig{K: 4, Greedy: true}), nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := req
			r.N = c.n
			res := generate(t, m, tok, c.st, r, c.procs...)
			if len(res.Lineage) == 0 {
				t.Fatal("no lineage recorded")
			}
			verified, kept := replayLineage(t, res)
			switch c.name {
			case "beam 4":
				discards := 0
				for _, ev := range res.Lineage {
					if ev.Op == core.LineageDiscard {
						discards++
					}
				}
				if discards == 0 {
					t.Error("a beam search over 24 steps pruned no beam")
				}
			case "speculative", "prompt lookup":
				if verified != res.Stats.Drafted || kept != res.Stats.Accepted {
					t.Errorf("lineage: %d verified, %d kept; stats: %d drafted, %d accepted", verified, kept, res.Stats.Drafted, res.Stats.Accepted)
				}
			}
			// Without Return.Lineage nothing is recorded.
			r.Return.Lineage = false
			if res := generate(t, m, tok, c.st, r, c.procs...); res.Lineage != nil {
				t.Errorf("%d lineage events recorded without Return.Lineage", len(res.Lineage))
			}
		})
	}
}

// TestEventsCarryTheStepTrace checks that with Return.Trace every streamed token event carries
// the trace of its step, equal to the one in the result.
func TestEventsCarryTheStepTrace(t *testing.T) {
	m, tok := testmodel.Default()
	temp, err := processors.NewTemperature(0.8)
	if err != nil {
		t.Fatal(err)
	}
	topK, err := processors.NewTopK(5)
	if err != nil {
		t.Fatal(err)
	}
	var events []core.Event
	req := core.Request{Prompt: "the cat", MaxNewTokens: 12, IgnoreEOS: true, N: 2, Seed: core.SeedOf(3),
		Return:  core.ReturnOptions{Trace: 4},
		OnEvent: func(ev core.Event) error { events = append(events, ev); return nil }}
	res := generate(t, m, tok, strategies.Ancestral{}, req, temp, topK)
	seen := 0
	for _, ev := range events {
		if ev.Token < 0 {
			continue
		}
		if ev.Trace == nil {
			t.Fatalf("event %+v carries no trace", ev)
		}
		want := res.Sequences[ev.Sequence].Trace[ev.Trace.Step]
		if ev.Trace.Chosen != ev.Token || !reflect.DeepEqual(*ev.Trace, want) {
			t.Fatalf("event trace %+v, result trace %+v", *ev.Trace, want)
		}
		if len(ev.Trace.Stages) != 3 {
			t.Fatalf("%d stages, want model + 2 processors", len(ev.Trace.Stages))
		}
		seen++
	}
	if seen != 24 {
		t.Fatalf("%d token events with a trace, want 24", seen)
	}
}
