// Package processors holds loom's built-in logits processors: temperature, top-k, top-p,
// min-p, typical-p, the repetition, frequency and presence penalties (alone or combined),
// no-repeat-n-gram, logit bias, min-new-tokens and bad words; and the samplers of llama.cpp,
// text-generation-webui and transformers beyond those: DRY, XTC, top-nσ, mirostat (v1 and
// v2), dynamic temperature, epsilon and eta cutoffs. docs/processors.md maps each to its
// settings in llama.cpp, vLLM and transformers.
//
// Every processor validates its parameters when it is built, returning a *core.ParamError that
// names the pipeline parameter, and never per token. Each works on dense rows and on sparse
// candidate sets alike:
//
//   - filters that truncate (top-k, top-p, min-p, typical-p) select without sorting the
//     vocabulary and leave a sparse set, so the processors after them touch the kept tokens
//     only;
//   - penalties, biases and bans touch only the tokens they apply to, never the whole row;
//   - nothing allocates per token in steady state: scratch space comes from the
//     core.Candidates being processed, so a processor without state is safe for concurrent
//     use by many sequences;
//   - processors with state per sequence (penalties' windows, DRY, XTC's coins, mirostat's
//     μ) are core.StatefulProcessors: the session clones them per sequence and per beam.
//
// Processors that compute probabilities report what core.Candidates.Probs reports: a NaN or
// +Inf logit is core.ErrInvalidLogits, a row with every token banned core.ErrNoCandidates.
// Processors that only shift a few logits pass NaN and ±Inf through unchanged (-Inf stays
// banned), leaving the error to whatever computes probabilities next.
package processors
