package server

import (
	"maps"
	"slices"
	"strconv"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// sampling holds a request's sampling fields; nil fields keep the pipeline's settings.
type sampling struct {
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	ResponseFormat   *responseFormat    `json:"response_format"`
	// think is the think parameter of response_format's constraint: set for a chat request
	// whose replies think (thinkUse.mode), so that the format holds the answer.
	think string

	// Extensions that vLLM and llama-server accept too.
	MinP              *float64 `json:"min_p"`
	TypicalP          *float64 `json:"typical_p"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
	MinTokens         *int     `json:"min_tokens"`
	StopTokenIDs      []int    `json:"stop_token_ids"`
}

// clone copies a spec deeply enough that changing its parts' parameters leaves the original
// alone.
func clone(s *pipeline.Spec) *pipeline.Spec {
	c := *s
	c.Strategy = clonePart(s.Strategy)
	c.Processors = make([]pipeline.PartSpec, len(s.Processors))
	for i, p := range s.Processors {
		c.Processors[i] = clonePart(p)
	}
	c.Stopping = make([]pipeline.PartSpec, len(s.Stopping))
	for i, p := range s.Stopping {
		c.Stopping[i] = clonePart(p)
	}
	return &c
}

func clonePart(p pipeline.PartSpec) pipeline.PartSpec {
	p.Params = maps.Clone(p.Params)
	if p.Params == nil {
		p.Params = map[string]any{}
	}
	return p
}

// validate checks the ranges of the sampling fields, naming the field at fault.
func (o *sampling) validate(vocab int) error {
	switch {
	case o.Temperature != nil && (*o.Temperature < 0 || *o.Temperature > 2):
		return badParam("temperature", "%v is outside [0, 2]", *o.Temperature)
	case o.TopP != nil && (*o.TopP < 0 || *o.TopP > 1):
		return badParam("top_p", "%v is outside [0, 1]", *o.TopP)
	case o.TopK != nil && *o.TopK < 0:
		return badParam("top_k", "%d must not be negative", *o.TopK)
	case o.PresencePenalty != nil && (*o.PresencePenalty < -2 || *o.PresencePenalty > 2):
		return badParam("presence_penalty", "%v is outside [-2, 2]", *o.PresencePenalty)
	case o.FrequencyPenalty != nil && (*o.FrequencyPenalty < -2 || *o.FrequencyPenalty > 2):
		return badParam("frequency_penalty", "%v is outside [-2, 2]", *o.FrequencyPenalty)
	case o.MinP != nil && (*o.MinP < 0 || *o.MinP > 1):
		return badParam("min_p", "%v is outside [0, 1]", *o.MinP)
	case o.TypicalP != nil && (*o.TypicalP <= 0 || *o.TypicalP > 1):
		return badParam("typical_p", "%v is outside (0, 1]", *o.TypicalP)
	case o.RepetitionPenalty != nil && (*o.RepetitionPenalty <= 0 || *o.RepetitionPenalty > 10):
		return badParam("repetition_penalty", "%v is outside (0, 10]", *o.RepetitionPenalty)
	case o.MinTokens != nil && *o.MinTokens < 0:
		return badParam("min_tokens", "%d must not be negative", *o.MinTokens)
	}
	if len(o.StopTokenIDs) > maxStops {
		return badParam("stop_token_ids", "%d ids: at most %d", len(o.StopTokenIDs), maxStops)
	}
	for i, id := range o.StopTokenIDs {
		if id < 0 || id >= vocab {
			return badParam("stop_token_ids", "id %d = %d is outside the vocabulary [0, %d)", i, id, vocab)
		}
	}
	if err := o.ResponseFormat.validate(); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(o.LogitBias)) {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= vocab {
			return badParam("logit_bias", "key %q is not a token id in [0, %d)", k, vocab)
		}
		if b := o.LogitBias[k]; b < -100 || b > 100 {
			return badParam("logit_bias", "bias %v of token %s is outside [-100, 100]", b, k)
		}
	}
	return nil
}

// apply changes spec the way the fields ask: temperature, top_p and top_k set the parameter
// of the pipeline's processor of that type or add one (temperature first, truncation last:
// top_k, top_p, typical_p, min_p), exactly as loom run's flags do, and a temperature above
// zero turns a greedy strategy into sampling; penalties and logit_bias set the pipeline's
// processor of that type or are added first, before temperature, the presence and frequency
// penalties counting generated tokens only (as vLLM does), the repetition penalty the prompt's
// too; min_tokens adds a min_new_tokens processor first; stop_token_ids adds a stop_tokens
// criterion and stop strings a stop_strings one.
func (o *sampling) apply(spec *pipeline.Spec, stop []string) {
	set := func(typ, param string, v any, first bool, field string) {
		for _, ps := range spec.Processors {
			if ps.Type == typ {
				ps.Params[param] = v
				return
			}
		}
		ps := pipeline.PartSpec{Type: typ, Params: map[string]any{param: v}, Path: "request field " + field}
		if typ == "presence_penalty" || typ == "frequency_penalty" {
			ps.Params["scope"] = "generated" // the OpenAI penalties count generated tokens
		}
		if first {
			spec.Processors = slices.Insert(spec.Processors, 0, ps)
		} else {
			spec.Processors = append(spec.Processors, ps)
		}
	}
	if o.Temperature != nil {
		set("temperature", "t", *o.Temperature, true, "temperature")
		if *o.Temperature > 0 && spec.Strategy.Type == "greedy" {
			spec.Strategy = pipeline.PartSpec{Type: "sample", Params: map[string]any{}, Path: spec.Strategy.Path}
		}
	}
	if o.TopK != nil {
		set("top_k", "k", int64(*o.TopK), false, "top_k")
	}
	if o.TopP != nil {
		set("top_p", "p", *o.TopP, false, "top_p")
	}
	if o.TypicalP != nil {
		set("typical_p", "p", *o.TypicalP, false, "typical_p")
	}
	if o.MinP != nil {
		set("min_p", "p", *o.MinP, false, "min_p")
	}
	// Shaping processors go before temperature; inserted in reverse so the order is
	// logit_bias, presence, frequency.
	if o.FrequencyPenalty != nil && *o.FrequencyPenalty != 0 {
		set("frequency_penalty", "penalty", *o.FrequencyPenalty, true, "frequency_penalty")
	}
	if o.PresencePenalty != nil && *o.PresencePenalty != 0 {
		set("presence_penalty", "penalty", *o.PresencePenalty, true, "presence_penalty")
	}
	if o.RepetitionPenalty != nil && *o.RepetitionPenalty != 1 {
		// prompt and generated tokens, as vLLM and llama-server count them
		set("repetition_penalty", "penalty", *o.RepetitionPenalty, true, "repetition_penalty")
	}
	if o.MinTokens != nil && *o.MinTokens > 0 {
		set("min_new_tokens", "n", int64(*o.MinTokens), true, "min_tokens")
	}
	if len(o.LogitBias) > 0 {
		bias := make(map[string]any, len(o.LogitBias))
		for k, v := range o.LogitBias {
			bias[k] = v
		}
		spec.Processors = slices.Insert(spec.Processors, 0, pipeline.PartSpec{Type: "logit_bias", Params: map[string]any{"bias": bias}, Path: "request field logit_bias"})
	}
	o.ResponseFormat.apply(spec, o.think)
	if len(o.StopTokenIDs) > 0 {
		ids := make([]any, len(o.StopTokenIDs))
		for i, id := range o.StopTokenIDs {
			ids[i] = int64(id)
		}
		spec.Stopping = append(spec.Stopping, pipeline.PartSpec{Type: "stop_tokens", Params: map[string]any{"ids": ids}, Path: "request field stop_token_ids"})
	}
	if len(stop) > 0 {
		list := make([]any, len(stop))
		for i, s := range stop {
			list[i] = s
		}
		spec.Stopping = append(spec.Stopping, pipeline.PartSpec{Type: "stop_strings", Params: map[string]any{"strings": list}, Path: "request field stop"})
	}
}

// build returns the pipeline a request runs: the entry's spec with the request's changes.
// Without changes it is still built afresh, so no two requests share a stateful part.
// first are processors put at the head of the chain (a request's tool-call constraint).
func (e *entry) build(o *sampling, stop []string, first ...pipeline.PartSpec) (*core.Pipeline, error) {
	spec := clone(e.spec)
	o.apply(spec, stop)
	spec.Processors = slices.Insert(spec.Processors, 0, first...)
	b, err := pipeline.Build(spec, e.options())
	if err != nil {
		return nil, err
	}
	// The models are shared (no closers); plugins belong to the server.
	return b.Pipeline, nil
}
