package main

import (
	"strings"
	"testing"

	"github.com/loomlm/loom/core"
)

// textOutput against event streams of the shapes strategies send, checked with the result
// they end in.
func TestTextOutput(t *testing.T) {
	seq := func(i int, text string, r core.FinishReason) core.SequenceResult {
		return core.SequenceResult{Index: i, Text: text, FinishReason: r}
	}
	cases := []struct {
		name   string
		quiet  bool
		events []core.Event
		result []core.SequenceResult
		want   string
	}{
		{"streamed, last chunk held", false,
			[]core.Event{{Text: "Once"}, {Text: " upon"}, {Text: " a time", Finished: true}},
			[]core.SequenceResult{seq(0, "Once upon a time", core.FinishLength)}, "Once upon a time\n"},
		{"beam: final events only", false,
			[]core.Event{{Sequence: 0, Text: "a b", Finished: true}, {Sequence: 1, Text: "a c", Finished: true}},
			[]core.SequenceResult{seq(0, "a b", core.FinishEOS), seq(1, "a c", core.FinishLength)},
			"--- sequence 0 (eos)\na b\n--- sequence 1 (length)\na c\n"},
		{"beam, quiet", true,
			[]core.Event{{Sequence: 0, Text: "a b", Finished: true}, {Sequence: 1, Text: "a c", Finished: true}},
			[]core.SequenceResult{seq(0, "a b", core.FinishEOS), seq(1, "a c", core.FinishLength)}, "a b\na c\n"},
		{"interrupted: nothing streamed", false, nil,
			[]core.SequenceResult{seq(0, "partial", core.FinishCancelled)}, "partial\n"},
		{"invalid UTF-8, byte by byte", false,
			[]core.Event{{Text: "a\x80"}, {Text: "\xff\xe2\x82b"}},
			[]core.SequenceResult{seq(0, "a\x80\xff\xe2\x82b", core.FinishLength)}, "a\uFFFD\uFFFD\uFFFD\uFFFDb\n"},
		{"retracted text", false,
			[]core.Event{{Text: "the dog"}, {Token: -1, Retract: 3}, {Text: "cat"}, {Text: "!", Finished: true}},
			[]core.SequenceResult{seq(0, "the cat!", core.FinishEOS)}, "the dog\n--- sequence 0 (eos), revised\nthe cat!\n"},
		{"retracted text, quiet", true,
			[]core.Event{{Text: "the dog"}, {Token: -1, Retract: 3}, {Text: "cat"}},
			[]core.SequenceResult{seq(0, "the cat", core.FinishEOS)}, "the dog\nthe cat\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			o := &textOutput{w: &b, quiet: c.quiet}
			for _, ev := range c.events {
				if err := o.event(ev); err != nil {
					t.Fatal(err)
				}
			}
			o.finish(&core.Result{Sequences: c.result})
			if b.String() != c.want {
				t.Errorf("got %q, want %q", b.String(), c.want)
			}
		})
	}
}
