package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/reasoning"
)

// usage is the OpenAI token count of a request.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails.CachedTokens are the prompt positions taken from the KV cache of
	// earlier requests (prefix reuse) instead of computed.
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// CompletionTokensDetails is sent for a chat whose replies think (job.think).
	CompletionTokensDetails *completionDetails `json:"completion_tokens_details,omitempty"`
}

// completionDetails are usage's details of the completion tokens: ReasoningTokens counts the
// tokens of the choices' thinking blocks (thinkUse.tokens).
type completionDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// usageOf counts the tokens of the returned choices: for beam search that is fewer than the
// tokens the search generated (Result.GeneratedTokens, which the metrics count).
func usageOf(results ...*core.Result) usage {
	var u usage
	for _, res := range results {
		for _, sq := range res.Sequences {
			u.CompletionTokens += len(sq.Tokens)
		}
		u.PromptTokens += len(res.PromptTokens)
		u.PromptTokensDetails.CachedTokens += res.CachedPromptTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// finishReason maps loom's finish reasons to OpenAI's: a stop condition is "stop", a limit
// (tokens, context window, time) is "length".
func finishReason(r core.FinishReason) string {
	switch r {
	case core.FinishLength, core.FinishTime:
		return "length"
	case core.FinishNone:
		return ""
	}
	return "stop"
}

var errTimeout = &APIError{Status: http.StatusGatewayTimeout, Type: "timeout", Code: codeOf("timeout"), Message: "the request ran past the server's per-request timeout"}

// run admits a job, generates and answers, streaming or not. The prompts of a batch run
// side by side, each as its own request (batched with every other request in the model's
// steps), their choices numbered prompt by prompt.
func (s *Server) run(w http.ResponseWriter, r *http.Request, j *job) {
	release, err := s.adm.acquire(r.Context())
	if err != nil {
		if r.Context().Err() != nil {
			s.metrics.request(j.endpoint, 499)
			return // the client is gone
		}
		s.fail(w, j.endpoint, err)
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context()) // a batch's first failure stops the rest
	defer cancel()

	var st *streamer
	if j.stream {
		st = newStreamer(w, j)
		defer st.stop()
	}
	reqs := j.requests()
	results := make([]*core.Result, len(reqs))
	errs := make([]error, len(reqs))
	if len(reqs) == 1 {
		results[0], errs[0] = s.generate(ctx, j, reqs[0], 0, st)
	} else {
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = s.generate(ctx, j, reqs[i], i*j.per, st)
				if errs[i] != nil {
					cancel() // the batch fails with its first error: the others stop
				}
			}()
		}
		wg.Wait()
	}
	if st != nil {
		st.stop()
	}
	var genErr error
	for i, res := range results {
		if res != nil {
			s.metrics.tokens(len(res.PromptTokens), res.GeneratedTokens)
		}
		if errs[i] != nil && (genErr == nil || errors.Is(genErr, context.Canceled) && !errors.Is(errs[i], context.Canceled)) {
			genErr = errs[i] // the first error, or one that is not just the others' cancellation
			if len(reqs) > 1 {
				genErr = fmt.Errorf("prompt %d of the batch: %w", i, genErr)
			}
		}
	}
	if genErr != nil {
		switch {
		case r.Context().Err() != nil:
			s.metrics.request(j.endpoint, 499)
			return // the client disconnected: its generation has stopped, nobody to answer
		case errors.Is(genErr, context.DeadlineExceeded):
			genErr = errTimeout
		}
		if st != nil && st.started {
			s.metrics.request(j.endpoint, asAPIError(genErr).Status)
			st.fail(genErr)
			return
		}
		s.fail(w, j.endpoint, genErr)
		return
	}
	s.metrics.request(j.endpoint, http.StatusOK)
	for _, res := range results {
		s.log.Info("request", "id", j.id, "endpoint", j.endpoint, "model", j.entry.name, "prompt_tokens", len(res.PromptTokens),
			"generated_tokens", res.GeneratedTokens, "seed", res.Seed, "duration", time.Since(j.start).String())
	}
	if st != nil {
		st.end(results)
		return
	}
	if j.bestOf > 0 {
		for _, res := range results {
			res.Sequences = best(res.Sequences, j.bestOf)
		}
	}
	if j.endpoint == "chat" {
		writeJSON(w, http.StatusOK, chatResponse(j, results[0]))
	} else {
		writeJSON(w, http.StatusOK, completionResponse(j, results))
	}
}

// generate runs one of a job's requests (runAdmitted), streaming its events to st (when
// streaming), its sequences numbered from first.
func (s *Server) generate(ctx context.Context, j *job, req core.Request, first int, st *streamer) (*core.Result, error) {
	obs := s.metrics.observer(j.start)
	batch, per := len(j.prompts) > 1, j.per
	req.OnEvent = func(ev core.Event) error {
		obs.event()
		if st != nil {
			if batch && ev.Sequence >= per {
				// the next prompt's choices begin at first + per
				return &core.ParamError{Param: "stream", Reason: fmt.Sprintf("strategy %s gave a prompt more than the %d sequences a streamed batch numbers per prompt (n); stream the prompts one by one, or ask without stream", j.pipe.Strategy.Name(), per)}
			}
			ev.Sequence += first
			return st.queue(ev)
		}
		return nil
	}
	return s.runAdmitted(ctx, j.entry, j.pipe, req)
}

// runAdmitted runs req on pipe once e's models have KV cache room for it, within the
// per-request timeout (counted from the end of the wait), joined to the model's batched
// steps, which it leaves as soon as the generation ends. An error of the wait is the
// context's: the client went away (or a batch failed) while it waited.
func (s *Server) runAdmitted(ctx context.Context, e *entry, pipe *core.Pipeline, req core.Request) (*core.Result, error) {
	releaseKV, err := s.admitKV(ctx, []*sharedModel{e.model, e.draft}, pipe, &req)
	if err != nil {
		return nil, err
	}
	defer releaseKV()
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	leave := e.model.batched.Join()
	defer leave()
	res, err := core.Generate(ctx, pipe, req)
	leave() // the batcher waits for no more steps of this request while its client reads
	return res, err
}

// completionResponse is the body of a finished /v1/completions request: the choices of each
// prompt's result in turn.
func completionResponse(j *job, results []*core.Result) map[string]any {
	var choices []map[string]any
	tok, withTop := j.pipe.Tokenizer, j.req.Return.TopLogprobs > 0
	for p, res := range results {
		var prompt []core.TokenLogprobs
		if j.logprobs && j.echo {
			prompt = res.PromptTokenLogprobs()
		}
		for k, sq := range res.Sequences {
			var lp *completionLogprobs
			if j.logprobs {
				lp = newCompletionLogprobs()
				if j.echo {
					lp.add(tok, prompt, 0, withTop, true)
				}
				lp.add(tok, sq.TokenLogprobs(), len(j.echoPrefix(p)), withTop, false)
			}
			// as a stream numbers them: choice i answers prompt i / per
			choices = append(choices, map[string]any{"index": p*j.per + k, "text": j.echoPrefix(p) + sq.Text, "logprobs": lp, "finish_reason": finishReason(sq.FinishReason)})
		}
	}
	return map[string]any{"id": j.id, "object": "text_completion", "created": j.created, "model": j.entry.name,
		"choices": choices, "usage": usageOf(results...), "system_fingerprint": fingerprint(results[0])}
}

// chatResponse is the body of a finished /v1/chat/completions request.
func chatResponse(j *job, res *core.Result) map[string]any {
	choices := make([]map[string]any, len(res.Sequences))
	for i, sq := range res.Sequences {
		var lp any
		if j.logprobs {
			lp = chatLogprobs(j.pipe.Tokenizer, sq.TokenLogprobs())
		}
		thinking, answer := j.think.split(sq.Text)
		msg := map[string]any{"role": "assistant", "content": answer}
		if thinking != "" {
			msg["reasoning_content"] = thinking
		}
		fr := finishReason(sq.FinishReason)
		if content, calls := j.tools.replyIn(answer, j.think); len(calls) > 0 {
			msg["content"], msg["tool_calls"] = content, calls
			if fr == "stop" {
				fr = "tool_calls"
			}
		}
		choices[i] = map[string]any{"index": i, "message": msg, "logprobs": lp, "finish_reason": fr}
	}
	return map[string]any{"id": j.id, "object": "chat.completion", "created": j.created, "model": j.entry.name,
		"choices": choices, "usage": j.usage(res), "system_fingerprint": fingerprint(res)}
}

// fingerprint names the seed a request ran with, so a client can repeat it.
func fingerprint(res *core.Result) string { return fmt.Sprintf("loom-seed-%d", res.Seed) }

// streamer writes a request's events as server-sent events. The generation queues its events
// (queue) and a goroutine of the stream's own writes them (writeQueued), so that a token costs
// the generation no write to its client before it asks for the next one: in a server decoding
// many streams, the next batched step waits for every stream's previous token, and a write to
// a socket (a system call) is most of what a stream does between steps. Events that queue
// while a write is under way go out together in the next one. Once stopped, the streamer's
// writing methods are the caller's.
type streamer struct {
	w       http.ResponseWriter
	flusher http.Flusher
	j       *job
	started bool
	roleSet map[int]bool
	echoed  map[int]bool // choices whose echoed prompt has been sent
	offsets map[int]int  // each choice's text streamed so far, in bytes (logprobs' text_offset)
	held    map[int]*heldReply
	// splitters split each choice's thinking from its answer (job.think).
	splitters map[int]*reasoning.Splitter
	err       error

	mu      sync.Mutex
	queued  []core.Event
	spare   []core.Event // the writer's last batch, reused for the next
	failed  error        // the writer's error, returned at the generation's next event
	stopped bool
	wake    chan struct{}
	exited  chan struct{}
}

func newStreamer(w http.ResponseWriter, j *job) *streamer {
	f, _ := w.(http.Flusher)
	st := &streamer{w: w, flusher: f, j: j, roleSet: map[int]bool{}, echoed: map[int]bool{}, offsets: map[int]int{}, held: map[int]*heldReply{}, splitters: map[int]*reasoning.Splitter{}, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	go st.writeQueued()
	return st
}

// queue hands ev to the writer; once a write has failed (the client is gone) it returns that
// error, which ends the generation.
func (st *streamer) queue(ev core.Event) error {
	if ev.Retract > 0 || ev.RetractTokens > 0 {
		return errRetract
	}
	st.mu.Lock()
	if st.failed != nil {
		st.mu.Unlock()
		return st.failed
	}
	st.queued = append(st.queued, ev)
	st.mu.Unlock()
	st.signal()
	return nil
}

func (st *streamer) signal() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// writeQueued writes the queued events, each batch in one flush, until stop.
func (st *streamer) writeQueued() {
	defer close(st.exited)
	for range st.wake {
		st.mu.Lock()
		evs, stopped := st.queued, st.stopped
		st.queued, st.spare = st.spare[:0], evs
		st.mu.Unlock()
		for _, ev := range evs {
			_ = st.event(ev)
		}
		if err := st.flush(); err != nil {
			st.mu.Lock()
			st.failed = err
			st.mu.Unlock()
		}
		if stopped {
			return
		}
	}
}

// stop waits until the writer has written what is queued and ended.
func (st *streamer) stop() {
	st.mu.Lock()
	st.stopped = true
	st.mu.Unlock()
	st.signal()
	<-st.exited
}

// start sends the headers (200) before the first event.
func (st *streamer) start() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	st.w.WriteHeader(http.StatusOK)
}

func (st *streamer) send(v any) error {
	if st.err != nil {
		return st.err
	}
	st.start()
	b, err := json.Marshal(v)
	if err == nil {
		_, err = fmt.Fprintf(st.w, "data: %s\n\n", b)
	}
	st.err = err
	return err
}

// flush sends what has been written to the client.
func (st *streamer) flush() error {
	if st.err == nil && st.started && st.flusher != nil {
		st.flusher.Flush()
	}
	return st.err
}

// chunk is one streamed object with the given choices.
func (st *streamer) chunk(choices []map[string]any, u *usage) map[string]any {
	obj := "text_completion"
	if st.j.endpoint == "chat" {
		obj = "chat.completion.chunk"
	}
	c := map[string]any{"id": st.j.id, "object": obj, "created": st.j.created, "model": st.j.entry.name, "choices": choices}
	if st.j.includeUsage {
		c["usage"] = u
	}
	return c
}

// errRetract fails a stream whose pipeline withdraws text it already streamed.
var errRetract = errors.New("the pipeline withdrew text it had streamed (a strategy that truncates); request it without stream")

// event writes ev (queue has refused retractions before it).
func (st *streamer) event(ev core.Event) error {
	if st.j.echo && !st.echoed[ev.Sequence] {
		if err := st.echo(ev); err != nil {
			return err
		}
	}
	if ev.Text == "" && !ev.Finished && len(ev.Logprobs) == 0 {
		return nil
	}
	var fr any
	if ev.Finished {
		fr = finishReason(ev.FinishReason)
	}
	if st.j.endpoint == "chat" && st.j.think.separates() {
		var err error
		if ev, err = st.thinkEvent(ev); err != nil || ev.Text == "" && !ev.Finished && len(ev.Logprobs) == 0 {
			return err
		}
	}
	if st.j.endpoint == "chat" && st.j.tools.reads() {
		return st.toolEvent(ev)
	}
	if st.j.endpoint == "chat" {
		delta := map[string]any{}
		if ev.Text != "" || !st.roleSet[ev.Sequence] || len(ev.Logprobs) > 0 {
			delta["content"] = ev.Text
		}
		return st.sendDelta(ev.Sequence, delta, ev.Logprobs, fr)
	}
	var lp *completionLogprobs
	if len(ev.Logprobs) > 0 {
		lp = newCompletionLogprobs()
		st.offsets[ev.Sequence] = lp.add(st.j.pipe.Tokenizer, ev.Logprobs, st.offsets[ev.Sequence], st.j.req.Return.TopLogprobs > 0, false)
	}
	return st.send(st.chunk([]map[string]any{{"index": ev.Sequence, "text": ev.Text, "logprobs": lp, "finish_reason": fr}}, nil))
}

// echo sends the chunk that opens an echoing choice: the prompt's text, and with logprobs its
// tokens' details (the choice's first event carries them).
func (st *streamer) echo(ev core.Event) error {
	st.echoed[ev.Sequence] = true
	p := 0 // one prompt's choices may be more than per (a strategy that samples more than it returns)
	if len(st.j.echoTexts) > 1 {
		p = ev.Sequence / st.j.per // a batch's are not (generate)
	}
	text := st.j.echoTexts[p]
	st.offsets[ev.Sequence] = len(text)
	var lp *completionLogprobs
	if st.j.logprobs {
		lp = newCompletionLogprobs()
		lp.add(st.j.pipe.Tokenizer, ev.Prompt, 0, st.j.req.Return.TopLogprobs > 0, true)
	}
	return st.send(st.chunk([]map[string]any{{"index": ev.Sequence, "text": text, "logprobs": lp, "finish_reason": nil}}, nil))
}

// end sends the usage chunk (when asked for) and the terminating [DONE].
func (st *streamer) end(results []*core.Result) {
	if st.j.includeUsage {
		u := st.j.usage(results...)
		_ = st.send(st.chunk([]map[string]any{}, &u))
	}
	st.done()
}

// fail sends an error event and ends the stream.
func (st *streamer) fail(err error) {
	_ = st.send(map[string]any{"error": asAPIError(err)})
	st.done()
}

func (st *streamer) done() {
	if st.err != nil {
		return
	}
	st.start()
	_, _ = fmt.Fprint(st.w, "data: [DONE]\n\n")
	if st.flusher != nil {
		st.flusher.Flush()
	}
}

// observer times a request's events for the latency histograms.
type observer struct {
	m     *metrics
	start time.Time
	last  time.Time
}
