package plugins

import (
	"context"
	"errors"
	"fmt"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/sdk/pluginpb"
)

// register adds the plugin's parts to reg: each as "<plugin>.<part>", and as "<plugin>" alone
// when it is the plugin's only part of its kind.
func (pl *Plugin) register(reg *pipeline.Registry) error {
	infos := pl.Parts()
	for i, p := range pl.parts {
		for _, typ := range infos[i].Types {
			doc := p.Doc
			if doc == "" {
				doc = "(no description)"
			}
			part := &pipeline.Part{
				Kind:   kindOf(p.Kind),
				Type:   typ,
				Doc:    fmt.Sprintf("%s [plugin %s, part %s]", doc, pl.name, p.Name),
				Source: pipeline.PluginSource(pl.name),
			}
			idx := uint32(i)
			switch p.Kind {
			case pluginpb.Kind_KIND_PROCESSOR:
				part.NewProcessor = func(a *pipeline.Args) (core.LogitsProcessor, error) {
					return pl.newProcessor(idx, typ, a.Env)
				}
			case pluginpb.Kind_KIND_STOPPING:
				part.NewStopping = func(a *pipeline.Args) (core.StoppingCriterion, error) {
					return pl.newStopping(idx, typ, a.Env)
				}
			case pluginpb.Kind_KIND_STRATEGY:
				part.NewStrategy = func(a *pipeline.Args) (core.Strategy, error) {
					return pl.newStrategy(idx, typ, a.Env)
				}
			default:
				return fmt.Errorf("plugin %q: part %q has an unknown kind", pl.name, p.Name)
			}
			if err := reg.Register(part); err != nil {
				return fmt.Errorf("plugin %q: %v", pl.name, err)
			}
		}
	}
	return nil
}

// useVocabulary sends the pipeline's vocabulary to the plugin once; restarts replay it.
func (pl *Plugin) useVocabulary(env *pipeline.Env) (int, error) {
	if env == nil || env.Model == nil || env.Tokenizer == nil {
		return 0, errors.New("plugin parts need the pipeline's model")
	}
	size := env.Model.Config().VocabSize
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.vocab != nil {
		if int(pl.vocab.Size) != size {
			return 0, fmt.Errorf("plugin %q already serves a model with %d logits per row, not %d", pl.name, pl.vocab.Size, size)
		}
		return size, nil
	}
	tok := env.Tokenizer
	sp := tok.Special()
	v := &pluginpb.Vocabulary{Size: uint32(size), Bos: sp.BOS, Eos: sp.EOS, EndOfGeneration: sp.EndOfGeneration}
	n := tok.VocabSize()
	v.Tokens = make([][]byte, n)
	for id := 0; id < n; id++ {
		v.Tokens[id] = tok.TokenBytes(core.TokenID(id))
	}
	proc, err := pl.acquire()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(pl.timeout, pl.host.opts.StartTimeout))
	defer cancel()
	if err := proc.setVocabulary(ctx, v); err != nil {
		if proc.dead.Load() || ctx.Err() != nil {
			return 0, proc.failed(err)
		}
		return 0, pl.errorf("vocabulary: %v", err)
	}
	pl.vocab = v
	return size, nil
}
