package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/loomlm/loom/core"
)

// textOutput writes the generated text of `loom run` without --json. A single sequence
// streams as it is generated; when the result holds several sequences (n > 1, or a beam
// search returning more than one) each is printed under a header, unless quiet. Text is
// always written as valid UTF-8: each byte that is not part of a valid character becomes
// U+FFFD, as in the JSON output.
type textOutput struct {
	w     io.Writer
	quiet bool
	// streamed is the raw text of sequence 0 written so far.
	streamed strings.Builder
	// revised is set when the strategy withdrew streamed text (Event.Retract): what was
	// written cannot be taken back, so streaming stops and the final text is written whole.
	revised bool
}

// event streams the text of sequence 0. The last event of a sequence is held back: it may
// carry a beam search's whole text, which waits for the result to say how many sequences
// there are.
func (o *textOutput) event(ev core.Event) error {
	if ev.Sequence != 0 || o.revised {
		return nil
	}
	if ev.Retract > 0 {
		o.revised = true
		return nil
	}
	if ev.Finished || ev.Text == "" {
		return nil
	}
	o.streamed.WriteString(ev.Text)
	_, err := io.WriteString(o.w, validUTF8(ev.Text))
	return err
}

// finish writes what the result holds beyond what was streamed: the rest of a single
// sequence, or every sequence under its header. A partial result (an interrupted run) is
// written the same way, so no generated text is lost.
func (o *textOutput) finish(res *core.Result) {
	streamed := o.streamed.String()
	seqs := res.Sequences
	if len(seqs) == 1 {
		rest := seqs[0].Text
		switch {
		case o.revised || !strings.HasPrefix(rest, streamed):
			// The streamed text was revised: start a new line with the final text.
			if streamed != "" {
				io.WriteString(o.w, "\n")
			}
			if !o.quiet && streamed != "" {
				fmt.Fprintf(o.w, "--- sequence 0 (%s), revised\n", seqs[0].FinishReason)
			}
		default:
			rest = rest[len(streamed):]
		}
		io.WriteString(o.w, validUTF8(rest)+"\n")
		return
	}
	if streamed != "" {
		io.WriteString(o.w, "\n")
	}
	for _, s := range seqs {
		if !o.quiet {
			fmt.Fprintf(o.w, "--- sequence %d (%s)\n", s.Index, s.FinishReason)
		}
		io.WriteString(o.w, validUTF8(s.Text)+"\n")
	}
}

// validUTF8 replaces every byte of s that is not part of a valid UTF-8 character with U+FFFD
// (byte by byte, as encoding/json does).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// printDetails writes the per-token details a run asked for: the trace of every processor
// and, per sequence, a table of the chosen tokens with their log-probabilities and the most
// likely alternatives.
func printDetails(w io.Writer, tok core.Tokenizer, res *core.Result) {
	for _, s := range res.Sequences {
		for _, st := range s.Trace {
			fmt.Fprintf(w, "step %d: chose %d %q\n", st.Step, st.Chosen, tok.TokenBytes(st.Chosen))
			for _, stage := range st.Stages {
				fmt.Fprintf(w, "  %-20s kept %-7d", stage.Processor, stage.Kept)
				for _, tp := range stage.Top {
					fmt.Fprintf(w, " %q %.3f", tp.Text, tp.Value)
				}
				fmt.Fprintln(w)
			}
		}
	}
	for _, s := range res.Sequences {
		if len(s.Logprobs) == 0 && len(s.TopLogprobs) == 0 {
			continue
		}
		printLogprobs(w, tok, s)
	}
	if res.PromptLogprobs != nil {
		printPromptLogprobs(w, tok, res)
	}
}

// printPromptLogprobs writes the prompt's table: position, token, its log-probability given
// the tokens before it and the top alternatives there, then the sum and the perplexity over
// the tokens that have one (all but the first).
func printPromptLogprobs(w io.Writer, tok core.Tokenizer, res *core.Result) {
	fmt.Fprintln(w, "--- prompt: log-probabilities (raw model, each token given the ones before it)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hasTop := res.PromptTopLogprobs != nil
	head := "pos\ttoken\tlogprob\t"
	if hasTop {
		head += "  top"
	}
	fmt.Fprintln(tw, head)
	var sum float64
	for i, id := range res.PromptTokens {
		if i == 0 {
			fmt.Fprintf(tw, "%d\t%q\t—\t\n", i, tok.TokenBytes(id))
			continue
		}
		lp := res.PromptLogprobs[i]
		sum += float64(lp)
		line := fmt.Sprintf("%d\t%q\t%.3f\t", i, tok.TokenBytes(id), lp)
		if hasTop {
			line += "  " + alternatives(tok, res.PromptTopLogprobs[i])
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	if n := len(res.PromptTokens) - 1; n > 0 {
		fmt.Fprintf(w, "prompt: %d tokens scored, sum of log-probabilities %.3f, perplexity %.3f\n", n, sum, math.Exp(-sum/float64(n)))
	}
}

// printLogprobs writes one sequence's table: step, token, score (log-probability after the
// processors), logprob (under the raw model) and the top raw alternatives.
func printLogprobs(w io.Writer, tok core.Tokenizer, s core.SequenceResult) {
	fmt.Fprintf(w, "--- sequence %d: log-probabilities (score: after the processors; logprob: raw model; top: raw alternatives)\n", s.Index)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hasScores, hasTop := len(s.Scores) > 0, len(s.TopLogprobs) > 0
	head := "step\ttoken\t"
	if hasScores {
		head += "score\tlogprob\t"
	}
	if hasTop {
		head += "  top"
	}
	fmt.Fprintln(tw, head)
	for i, id := range s.Tokens {
		line := fmt.Sprintf("%d\t%q\t", i, tok.TokenBytes(id))
		if hasScores && i < len(s.Scores) && i < len(s.Logprobs) {
			line += fmt.Sprintf("%.3f\t%.3f\t", s.Scores[i], s.Logprobs[i])
		} else if hasScores {
			line += "\t\t"
		}
		if hasTop && i < len(s.TopLogprobs) {
			line += "  " + alternatives(tok, s.TopLogprobs[i])
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// alternatives lists a step's top tokens with their log-probabilities.
func alternatives(tok core.Tokenizer, top []core.TokenProb) string {
	alts := make([]string, len(top))
	for j, tp := range top {
		alts[j] = fmt.Sprintf("%q %.3f", tok.TokenBytes(tp.ID), tp.Value)
	}
	return strings.Join(alts, ", ")
}
