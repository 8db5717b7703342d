package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// job is one validated request, ready to run.
type job struct {
	endpoint     string // "completions" or "chat"
	entry        *entry
	pipe         *core.Pipeline
	req          core.Request
	stream       bool
	includeUsage bool
	// logprobs asks for per-token log-probabilities in the response.
	logprobs bool
	// prompts are a completion request's prompts (a batch of several, each answered with its
	// own choices); req holds the first.
	prompts []promptInput
	// echo puts the prompt before each choice's text (completions' echo): echoTexts[i] before
	// the choices of prompt i, and with logprobs the prompt tokens' details before the
	// generated ones'.
	echo      bool
	echoTexts []string
	// tools, for a chat request with tools, reads (and may constrain) the replies' calls.
	tools *toolUse
	// think, for a chat request to a model whose template thinks, splits the replies'
	// thinking (reasoning_content) from their content.
	think *thinkUse
	// per is how many choices each prompt answers (choicesPerPrompt): a batch's choice i
	// answers prompt i / per.
	per int
	// bestOf, when > 0, is how many of the request's sequences (best_of of them) are returned:
	// those with the highest mean log-probability per token.
	bestOf  int
	id      string
	created int64
	start   time.Time
}

// echoPrefix is what precedes the generated text of prompt i's choices: the prompt when it is
// echoed.
func (j *job) echoPrefix(i int) string {
	if j.echo {
		return j.echoTexts[i]
	}
	return ""
}

// requests returns the job's core requests, one per prompt.
func (j *job) requests() []core.Request {
	if len(j.prompts) <= 1 {
		return []core.Request{j.req}
	}
	out := make([]core.Request, len(j.prompts))
	for i, p := range j.prompts {
		out[i] = j.req
		out[i].Prompt, out[i].PromptTokens = p.text, p.tokens
	}
	return out
}

// choicesPerPrompt sets j.per, the choices each prompt of j answers: what the strategy
// returns for the request's n (beam search its num_return_sequences), else n; with best_of,
// the best n of them. A count the strategy refuses is the request's fault, found before it
// waits for anything: on best_of when best_of raised the count, on n otherwise.
func (j *job) choicesPerPrompt() error {
	j.per = max(j.req.N, 1)
	if rc, ok := j.pipe.Strategy.(interface{ Returns(n int) (int, error) }); ok {
		n, err := rc.Returns(j.req.N)
		var pe *core.ParamError
		switch {
		case j.bestOf > 0 && errors.As(err, &pe):
			return badParam("best_of", "%d: %s", j.req.N, pe.Reason)
		case err != nil:
			return err
		}
		j.per = n
	}
	if j.bestOf > 0 {
		j.per = j.bestOf
	}
	return nil
}

func (s *Server) newJob(endpoint string, e *entry) *job {
	return &job{endpoint: endpoint, entry: e, start: time.Now(), created: time.Now().Unix(),
		id: fmt.Sprintf("%s-%d-%d", map[string]string{"completions": "cmpl", "chat": "chatcmpl"}[endpoint], time.Now().UnixNano(), s.ids.Add(1))}
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var body completionRequest
	j, err := s.prepareCompletion(w, r, &body)
	if err != nil {
		s.fail(w, "completions", err)
		return
	}
	s.run(w, r, j)
}

func (s *Server) prepareCompletion(w http.ResponseWriter, r *http.Request, body *completionRequest) (*job, error) {
	if err := s.decode(w, r, body); err != nil {
		return nil, err
	}
	e, err := s.resolve(&body.common)
	if err != nil {
		return nil, err
	}
	j := s.newJob("completions", e)
	j.req = e.defaults()
	stop, err := body.toRequest(e, body.MaxTokens, &j.req)
	if err != nil {
		return nil, err
	}
	if j.prompts, err = completionPrompts(body.Prompt, e.model.raw.Config().VocabSize); err != nil {
		return nil, err
	}
	if body.Suffix != nil {
		// An empty suffix asks for nothing of a model without fill-in-the-middle tokens: a
		// completion is what comes after the prompt.
		fim, noFIM := fimOf(e)
		switch {
		case noFIM != nil && *body.Suffix != "":
			return nil, badParam("suffix", "%v", noFIM)
		case noFIM == nil && body.Echo:
			return nil, badParam("echo", "cannot be combined with suffix: the prompt the model sees is the prefix, the suffix and their markers")
		case noFIM == nil:
			if j.prompts, err = fillInTheMiddle(e.model.tok, fim, j.prompts, *body.Suffix); err != nil {
				return nil, err
			}
		}
	}
	j.req.Prompt, j.req.PromptTokens = j.prompts[0].text, j.prompts[0].tokens
	if body.Logprobs != nil {
		if *body.Logprobs < 0 || *body.Logprobs > maxTopLogprobs {
			return nil, badParam("logprobs", "%d is outside [0, %d]", *body.Logprobs, maxTopLogprobs)
		}
		j.logprobs = true
		j.req.Return.Logprobs, j.req.Return.TopLogprobs = true, *body.Logprobs
	}
	if body.BestOf != nil {
		n := max(j.req.N, 1)
		switch {
		case *body.BestOf < n || *body.BestOf > maxN:
			return nil, badParam("best_of", "%d is outside [n = %d, %d]", *body.BestOf, n, maxN)
		case body.Stream && *body.BestOf > n:
			return nil, badParam("best_of", "cannot be streamed: the best choices are known only when all %d have finished", *body.BestOf)
		case *body.BestOf > n:
			j.bestOf, j.req.N = n, *body.BestOf
			j.req.Return.Logprobs = true // to rank them
		}
	}
	if body.Echo {
		j.echo = true
		for _, p := range j.prompts {
			text := p.text
			if p.tokens != nil {
				var b []byte
				for _, id := range p.tokens {
					b = append(b, e.model.tok.TokenBytes(id)...)
				}
				text = string(b)
			}
			j.echoTexts = append(j.echoTexts, text)
		}
		j.req.Return.PromptLogprobs = j.logprobs
	}
	return j, s.finish(j, &body.common, stop)
}

// renderChat renders a chat request's prompt and reads what its replies will hold: its tools'
// use (nil without tools) and its thinking (nil for a template that does not think). An error
// is the request's fault (a 400 naming its field) or the template's.
func renderChat(e *entry, body *chatRequest) (prompt string, templated bool, tu *toolUse, think *thinkUse, err error) {
	if tu, err = newToolUse(body); err != nil {
		return "", false, nil, nil, err
	}
	vars, err := templateVars(body.ChatTemplateKwargs)
	if err != nil {
		return "", false, nil, nil, err
	}
	if prompt, templated, err = chatPrompt(e, body.Messages, tu, vars); err != nil {
		return "", false, nil, nil, err
	}
	if tu.reads() {
		if err := tu.check(); err != nil {
			return "", false, nil, nil, err
		}
	}
	if think, err = thinkOf(e, body.ReasoningFormat, prompt, templated); err != nil {
		return "", false, nil, nil, err
	}
	return prompt, templated, tu, think, nil
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var body chatRequest
	j, err := s.prepareChat(w, r, &body)
	if err != nil {
		s.fail(w, "chat", err)
		return
	}
	s.run(w, r, j)
}

func (s *Server) prepareChat(w http.ResponseWriter, r *http.Request, body *chatRequest) (*job, error) {
	if err := s.decode(w, r, body); err != nil {
		return nil, err
	}
	e, err := s.resolve(&body.common)
	if err != nil {
		return nil, err
	}
	j := s.newJob("chat", e)
	j.req = e.defaults()
	maxTokens := body.MaxCompletionTokens
	if maxTokens == nil {
		maxTokens = body.MaxTokens
	}
	stop, err := body.toRequest(e, maxTokens, &j.req)
	if err != nil {
		return nil, err
	}
	prompt, templated, tu, think, err := renderChat(e, body)
	if err != nil {
		return nil, err
	}
	if j.think = think; think != nil {
		// Constraints of the reply hold its answer and leave its thinking free.
		body.sampling.think = j.think.mode()
		if tu != nil {
			tu.think = j.think.mode()
		}
	}
	j.tools = tu
	if tu.holds() {
		if rf := body.ResponseFormat; rf != nil && rf.Type != "text" {
			return nil, badParam("response_format", "%q and tool_choice %q cannot both hold the reply: it is either a tool call or the format", rf.Type, tu.choice)
		}
	}
	j.req.Prompt = prompt
	if templated {
		// The template wrote the special tokens (BOS included, where the model wants it).
		j.req.ParseSpecial, j.req.NoSpecial = true, true
	} else {
		stop = append(stop, PlainChatStops...)
	}
	if body.TopLogprobs != nil {
		if !body.Logprobs {
			return nil, badParam("top_logprobs", "requires logprobs = true")
		}
		if *body.TopLogprobs < 0 || *body.TopLogprobs > maxTopLogprobs {
			return nil, badParam("top_logprobs", "%d is outside [0, %d]", *body.TopLogprobs, maxTopLogprobs)
		}
		j.req.Return.TopLogprobs = *body.TopLogprobs
	}
	if body.Logprobs {
		j.logprobs = true
		j.req.Return.Logprobs = true
	}
	return j, s.finish(j, &body.common, stop)
}

// finish checks what both endpoints share and builds the request's pipeline.
func (s *Server) finish(j *job, c *common, stop []string) error {
	j.stream = c.Stream
	j.includeUsage = c.StreamOptions != nil && c.StreamOptions.IncludeUsage
	var first []pipeline.PartSpec
	if ps := j.tools.constraint(); ps != nil {
		first = append(first, *ps)
	}
	p, err := j.entry.build(&c.sampling, stop, first...)
	if err != nil {
		return err
	}
	j.pipe = p
	if err := j.choicesPerPrompt(); err != nil {
		return err
	}
	if c.User != "" {
		s.log.Debug("request", "id", j.id, "user", c.User)
	}
	return nil
}

// resolve finds the pipeline a request runs: its inline pipeline, or the loaded one it names.
func (s *Server) resolve(c *common) (*entry, error) {
	if c.Pipeline == nil {
		return s.entryOf(c.Model)
	}
	e, err := s.inlineEntry(*c.Pipeline)
	if err != nil {
		return nil, err
	}
	if c.Model != "" {
		e.name = c.Model
	}
	return e, nil
}

// entryOf finds the pipeline a request names.
func (s *Server) entryOf(model string) (*entry, error) {
	if model == "" {
		return nil, badParam("model", "missing: name a pipeline (GET /v1/models lists them)")
	}
	return s.lookup(model)
}

// defaults returns a request with the pipeline's [generation] settings.
func (e *entry) defaults() core.Request {
	g := e.spec.Generation
	return core.Request{MaxNewTokens: g.MaxNewTokens, Seed: g.Seed, N: max(g.N, 1), IgnoreEOS: g.IgnoreEOS}
}

// fail answers a request that could not run and counts it.
func (s *Server) fail(w http.ResponseWriter, endpoint string, err error) {
	ae := asAPIError(err)
	s.metrics.request(endpoint, ae.Status)
	if ae.Status >= 500 {
		s.log.Error("request failed", "endpoint", endpoint, "error", err)
	}
	writeError(w, ae)
}
