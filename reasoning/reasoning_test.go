package reasoning_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomlm/loom/reasoning"
)

// reference is the package doc's rules written out for a whole reply, apart from Splitter.
func reference(reply string, open bool) (thinking, answer string) {
	const blanks = " \t\r\n"
	t := reasoning.Think
	body := reply
	if !open {
		rest := strings.TrimLeft(reply, blanks)
		if !strings.HasPrefix(rest, t.Open) {
			return "", reply
		}
		body = rest[len(t.Open):]
	}
	th, an, closed := strings.Cut(body, t.Close)
	if !closed {
		return strings.Trim(th, blanks), ""
	}
	return strings.Trim(th, blanks), strings.TrimLeft(an, blanks)
}

func TestSplit(t *testing.T) {
	cases := []struct {
		reply           string
		open            bool
		thinking, answr string
	}{
		{"Hello.", false, "", "Hello."},
		{"  Hello.", false, "", "  Hello."},
		{"<think>\nLet me see.\n</think>\n\nHello.", false, "Let me see.", "Hello."},
		{"\n<think>a</think>b", false, "a", "b"},
		{"<think>\n\n</think>\n\nHello.", false, "", "Hello."},
		{"Let me see.\n</think>\n\nHello.", true, "Let me see.", "Hello."},
		{"Let me see. Still", true, "Let me see. Still", ""},
		{"<think>cut off by the token limit\n", false, "cut off by the token limit", ""},
		{"Hello <think>not thinking</think>", false, "", "Hello <think>not thinking</think>"},
		{"<thi", false, "", "<thi"},
		{"<think>a</thi", false, "a</thi", ""},
		{"<think>a</think>b</think>c", false, "a", "b</think>c"},
		{"", false, "", ""},
		{"", true, "", ""},
		{"<think>x</think>", false, "x", ""},
	}
	for _, c := range cases {
		th, an := reasoning.Think.Split(c.reply, c.open)
		if th != c.thinking || an != c.answr {
			t.Errorf("Split(%q, %v) = %q, %q; want %q, %q", c.reply, c.open, th, an, c.thinking, c.answr)
		}
		if rth, ran := reference(c.reply, c.open); rth != c.thinking || ran != c.answr {
			t.Errorf("reference(%q, %v) = %q, %q; the table says %q, %q", c.reply, c.open, rth, ran, c.thinking, c.answr)
		}
	}
}

// TestSplitterPiecesMatchWhole streams random replies in random pieces: what the pieces give
// out, put together, is the reference's split of the whole reply, and nothing is given out
// as thinking once the answer has begun. A Splitter flushed takes the next reply of the same
// kind (open or not) as a new one would.
func TestSplitterPiecesMatchWhole(t *testing.T) {
	reused := map[bool]*reasoning.Splitter{false: reasoning.Think.NewSplitter(false), true: reasoning.Think.NewSplitter(true)}
	words := []string{"<think>", "</think>", "<", "</", "<th", "</thi", "think>", "nk>", ">", "\n", "\n\n", " ", "\t", "a", "Hello", "x y", "é"}
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 20000; iter++ {
		var b strings.Builder
		for n := rng.IntN(10); n > 0; n-- {
			b.WriteString(words[rng.IntN(len(words))])
		}
		reply, open := b.String(), rng.IntN(2) == 0
		s := reasoning.Think.NewSplitter(open)
		if iter%2 == 1 {
			s = reused[open]
		}
		var th, an strings.Builder
		for rest := reply; rest != ""; {
			k := 1 + rng.IntN(len(rest))
			pt, pa := s.Write(rest[:k])
			if pt != "" && an.Len() > 0 {
				t.Fatalf("%q (open %v): thinking %q given out after answer %q", reply, open, pt, an.String())
			}
			th.WriteString(pt)
			an.WriteString(pa)
			rest = rest[k:]
		}
		pt, pa := s.Flush()
		th.WriteString(pt)
		an.WriteString(pa)
		wt, wa := reference(reply, open)
		if th.String() != wt || an.String() != wa {
			t.Fatalf("%q (open %v) in pieces: %q, %q; whole: %q, %q", reply, open, th.String(), an.String(), wt, wa)
		}
	}
}

func TestEmptyTagsOpenNoBlock(t *testing.T) {
	for _, tags := range []reasoning.Tags{{}, {Open: "<think>"}, {Close: "</think>"}} {
		for _, open := range []bool{false, true} {
			if th, an := tags.Split("<think>a</think>b", open); th != "" || an != "<think>a</think>b" {
				t.Errorf("%+v (open %v): %q, %q", tags, open, th, an)
			}
		}
		if tags.OpenIn("<think>") && tags.Open == "" {
			t.Errorf("%+v opens a block", tags)
		}
	}
	var zero reasoning.Splitter
	th, an := zero.Write("<think>a</think>b")
	th2, an2 := zero.Flush()
	if th+th2 != "" || an+an2 != "<think>a</think>b" {
		t.Errorf("the zero Splitter: %q, %q", th+th2, an+an2)
	}
}

func TestDetectAndOpenIn(t *testing.T) {
	if _, ok := reasoning.Detect("{{ message.content.split('</think>')[-1] }}"); !ok {
		t.Error("a template that splits at </think> thinks")
	}
	if _, ok := reasoning.Detect("{{ message.content }}"); ok {
		t.Error("a template without </think> does not think")
	}
	for prompt, want := range map[string]bool{
		"<｜Assistant｜><think>\n":                            true,
		"<|im_start|>assistant\n":                           false,
		"<|im_start|>assistant\n<think>\n\n</think>\n\n":    false,
		"<think>old</think> <|im_start|>assistant\n<think>": true,
		// a user quoting the tag does not open a block
		"<|im_start|>user\nWhat does <think> mean?<|im_end|>\n<|im_start|>assistant\n": false,
	} {
		if got := reasoning.Think.OpenIn(prompt); got != want {
			t.Errorf("OpenIn(%q) = %v, want %v", prompt, got, want)
		}
	}
}
