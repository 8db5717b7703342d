package plugins

import (
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/sdk/pluginpb"
	"github.com/loomlm/loom/sdk/shm"
)

// stopping is a plugin's stopping criterion as the pipeline sees it. core's criteria cannot
// return errors: when the plugin fails, the sequence finishes with reason "error" and a detail
// that names the plugin and what happened.
type stopping struct {
	pl       *Plugin
	part     uint32
	typ      string
	holdBack int
	row      pluginpb.Row
}

var (
	_ core.StoppingCriterion = (*stopping)(nil)
	_ core.TextHolder        = (*stopping)(nil)
)

func (pl *Plugin) newStopping(idx uint32, typ string, env *pipeline.Env) (*stopping, error) {
	if _, err := pl.useVocabulary(env); err != nil {
		return nil, err
	}
	return &stopping{pl: pl, part: idx, typ: typ, holdBack: int(pl.parts[idx].HoldBack)}, nil
}

// Name implements core.StoppingCriterion.
func (s *stopping) Name() string { return s.typ }

// HoldBack implements core.TextHolder.
func (s *stopping) HoldBack() int { return s.holdBack }

// Check implements core.StoppingCriterion.
func (s *stopping) Check(seq *core.Sequence) core.Stop {
	var st core.Stop
	err := s.pl.with(func(proc *process) error {
		r := &s.row
		r.Reset()
		r.Index, r.PromptLen = int32(seq.Index()), uint32(seq.PromptLen())
		r.NumTokens, r.TextLen = uint32(len(seq.Tokens())), uint32(len(seq.Text()))
		var mailbox uint64
		if proc.bell != nil {
			mailbox = 64 << 10
		}
		if reg := proc.region; reg != nil {
			r.TokensOff = headerSize + mailbox
			r.TextOff = shm.AlignUp(r.TokensOff + 4*uint64(r.NumTokens))
			if end := int(r.TextOff) + int(r.TextLen); end > reg.Size() {
				if err := reg.Grow(max(end, 2*reg.Size())); err != nil {
					return s.pl.errorf("%v", err)
				}
			}
			toks, _ := reg.Int32s(r.TokensOff, int(r.NumTokens))
			copy(toks, seq.Tokens())
			text, _ := reg.Bytes(r.TextOff, int(r.TextLen))
			copy(text, seq.Text())
		} else {
			r.Tokens, r.Text = seq.Tokens(), seq.Text()
		}
		reply, err := proc.roundTrip(&pluginpb.StepRequest{Call: &pluginpb.StepRequest_Stop{Stop: &pluginpb.StopCall{Part: s.part, Row: r}}}, mailbox)
		if err != nil {
			return err
		}
		if reply.Stop == nil {
			return proc.malformed("no verdict")
		}
		v := reply.Stop
		if v.Reason == "" {
			return nil
		}
		st = core.Stop{Reason: core.FinishReason(clean([]byte(v.Reason))), Detail: clean([]byte(v.Detail)), CutText: v.CutText, TextEnd: int(v.TextEnd)}
		if st.CutText && (st.TextEnd < 0 || st.TextEnd > len(seq.Text())) {
			return proc.malformed("cut at byte %d of a %d-byte text", st.TextEnd, len(seq.Text()))
		}
		return nil
	})
	if err != nil {
		return core.Stop{Reason: core.FinishError, Detail: err.Error()}
	}
	return st
}
