package server

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// The decoding workbench: a page at / (files in workbench/, embedded in the binary) that edits,
// validates and runs pipelines and shows what every processor did at every step, with the API
// it calls under /loom/:
//
//	GET  /loom/pipelines  the loaded pipelines with their TOML source
//	GET  /loom/parts      the registered processors, stopping criteria and strategies
//	POST /loom/validate   {"pipeline": TOML} → {"ok", "errors": [{line, path, message, text}]}
//	POST /loom/run        a run streamed as server-sent events (see workbenchRun)

//go:embed workbench
var workbenchFiles embed.FS

// Limits of a workbench run.
const (
	workbenchMaxTokens = 1024
	workbenchMaxTrace  = 20
)

func (s *Server) registerWorkbench() {
	static, err := fs.Sub(workbenchFiles, "workbench")
	if err != nil {
		panic(err) // the embedded directory exists at build time
	}
	files := http.FileServer(http.FS(static))
	s.mux.Handle("GET /{$}", files)
	s.mux.Handle("GET /workbench/", http.StripPrefix("/workbench/", files))
	s.mux.HandleFunc("GET /loom/pipelines", s.handleWorkbenchPipelines)
	s.mux.HandleFunc("GET /loom/parts", s.handleWorkbenchParts)
	s.mux.HandleFunc("POST /loom/validate", s.handleWorkbenchValidate)
	s.mux.HandleFunc("POST /loom/run", s.handleWorkbenchRun)
}

// workbenchPipeline is one loaded pipeline as the page lists it.
type workbenchPipeline struct {
	Name     string `json:"name"`
	Strategy string `json:"strategy"`
	Source   string `json:"source"`
	File     string `json:"file"`
}

func (s *Server) handleWorkbenchPipelines(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	list := make([]workbenchPipeline, 0, len(s.pipelines))
	for _, e := range s.pipelines {
		list = append(list, workbenchPipeline{Name: e.name, Strategy: e.spec.Strategy.Type, Source: e.spec.Source, File: e.spec.File})
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	writeJSON(w, http.StatusOK, map[string]any{"pipelines": list})
}

// workbenchParam is one parameter of a part; Default is absent for a required parameter.
type workbenchParam struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Doc      string `json:"doc"`
	Default  any    `json:"default,omitempty"`
	Required bool   `json:"required"`
}

// workbenchPart is one registered part type.
type workbenchPart struct {
	Type   string           `json:"type"`
	Doc    string           `json:"doc"`
	Source string           `json:"source"`
	Params []workbenchParam `json:"params"`
}

// registry returns the part types the server knows: the built-ins and every loaded
// pipeline's plugin parts. Workbench pipelines may use all of them.
func (s *Server) registry() *pipeline.Registry {
	reg := pipeline.Builtins().Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.pipelines))
	for n := range s.pipelines {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, k := range []pipeline.Kind{pipeline.Processor, pipeline.Stopping, pipeline.Strategy} {
			for _, p := range s.pipelines[n].reg.Parts(k) {
				if _, ok := reg.Lookup(k, p.Type); !ok {
					_ = reg.Register(p)
				}
			}
		}
	}
	return reg
}

func (s *Server) handleWorkbenchParts(w http.ResponseWriter, r *http.Request) {
	reg := s.registry()
	out := map[string][]workbenchPart{}
	for _, k := range []pipeline.Kind{pipeline.Processor, pipeline.Stopping, pipeline.Strategy} {
		parts := []workbenchPart{}
		for _, p := range reg.Parts(k) {
			wp := workbenchPart{Type: p.Type, Doc: p.Doc, Source: p.Source, Params: []workbenchParam{}}
			for _, prm := range p.Params {
				wp.Params = append(wp.Params, workbenchParam{Name: prm.Name, Type: prm.Type.String(), Doc: prm.Doc,
					Default: prm.Default, Required: prm.Default == nil})
			}
			parts = append(parts, wp)
		}
		out[map[pipeline.Kind]string{pipeline.Processor: "processors", pipeline.Stopping: "stopping", pipeline.Strategy: "strategies"}[k]] = parts
	}
	writeJSON(w, http.StatusOK, out)
}

// workbenchIssue is one problem of an edited pipeline, at its line (0: the whole file).
type workbenchIssue struct {
	Line    int    `json:"line"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
	// Text is the error as `loom validate` prints it.
	Text string `json:"text"`
}

// workbenchEntry builds an entry from an edited pipeline: like an inline pipeline of the API,
// but it may declare a served model as [draft_model], and plugins that a loaded pipeline
// declared exactly so (their running processes serve it; it starts no program).
func (s *Server) workbenchEntry(src string) (*entry, *core.Pipeline, error) {
	e, err := s.servedEntry(src, true)
	if err != nil {
		return nil, nil, err
	}
	if e.reg, err = s.runningPlugins(e.spec.Plugins); err != nil {
		return nil, nil, err
	}
	e.spec.Plugins = nil
	p, err := e.build(&sampling{}, nil)
	if err != nil {
		return nil, nil, err
	}
	return e, p, nil
}

// issuesOf lists the problems err reports, each at its line.
func issuesOf(err error) []workbenchIssue {
	var es pipeline.Errors
	if errors.As(err, &es) {
		out := make([]workbenchIssue, len(es))
		for i, e := range es {
			out[i] = workbenchIssue{Line: e.Line, Path: e.Path, Message: e.Msg, Text: e.Error()}
		}
		return out
	}
	msg := asAPIError(err).Message
	return []workbenchIssue{{Message: msg, Text: inlineFile + ": " + msg}}
}

func (s *Server) handleWorkbenchValidate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Pipeline string `json:"pipeline"`
	}
	if err := s.decode(w, r, &body); err != nil {
		writeError(w, asAPIError(err))
		return
	}
	if _, _, err := s.workbenchEntry(body.Pipeline); err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "errors": issuesOf(err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "errors": []workbenchIssue{}})
}

// workbenchRunRequest is the body of POST /loom/run: a loaded pipeline by name, or an edited
// one as TOML, with the prompt and the run's settings.
type workbenchRunRequest struct {
	Model     string  `json:"model"`
	Pipeline  *string `json:"pipeline"`
	Prompt    string  `json:"prompt"`
	Seed      *uint64 `json:"seed"`
	MaxTokens *int    `json:"max_tokens"`
	// Trace is how many top tokens each processor's stage records (default 10).
	Trace *int `json:"trace"`
}

// handleWorkbenchRun runs a pipeline with every detail recorded (trace, log-probabilities,
// lineage) and streams it as server-sent events, each a JSON object with a "type":
//
//	{"type":"token", "seq", "token", "text", "score", "finished", "finish_reason", "trace"}
//	{"type":"retract", "seq", "bytes"}
//	{"type":"result", "result": the Result as `loom run --json --trace` prints it}
//	{"type":"error", "error": an OpenAI error object}
//
// A request that cannot start gets a plain JSON error with its HTTP status instead.
func (s *Server) handleWorkbenchRun(w http.ResponseWriter, r *http.Request) {
	var body workbenchRunRequest
	if err := s.decode(w, r, &body); err != nil {
		writeError(w, asAPIError(err))
		return
	}
	e, pipe, err := s.workbenchPipeline(&body)
	if err != nil {
		writeError(w, asAPIError(err))
		return
	}
	req := e.defaults()
	req.Prompt = body.Prompt
	if body.Prompt == "" {
		writeError(w, badParam("prompt", "missing"))
		return
	}
	if body.Seed != nil {
		req.Seed = core.SeedOf(*body.Seed)
	}
	if body.MaxTokens != nil {
		if *body.MaxTokens < 0 || *body.MaxTokens > workbenchMaxTokens {
			writeError(w, badParam("max_tokens", "%d is outside [0, %d]", *body.MaxTokens, workbenchMaxTokens))
			return
		}
		req.MaxNewTokens = *body.MaxTokens
	}
	req.Return = core.ReturnOptions{Logprobs: true, TopLogprobs: 5, Trace: 10, Lineage: true, PromptLogprobs: true}
	if body.Trace != nil {
		if *body.Trace < 1 || *body.Trace > workbenchMaxTrace {
			writeError(w, badParam("trace", "%d is outside [1, %d]", *body.Trace, workbenchMaxTrace))
			return
		}
		req.Return.Trace = *body.Trace
	}

	release, err := s.adm.acquire(r.Context())
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, asAPIError(err))
		}
		return
	}
	defer release()
	flusher, _ := w.(http.Flusher)
	started := false // the event stream's headers are sent with its first event
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if !started {
			started = true
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	req.OnEvent = func(ev core.Event) error {
		if ev.Retract > 0 {
			return send(map[string]any{"type": "retract", "seq": ev.Sequence, "bytes": ev.Retract})
		}
		return send(map[string]any{"type": "token", "seq": ev.Sequence, "token": ev.Token, "text": ev.Text,
			"score": ev.Score, "finished": ev.Finished, "finish_reason": ev.FinishReason, "trace": ev.Trace})
	}
	start := time.Now()
	res, genErr := s.runAdmitted(r.Context(), e, pipe, req)
	if res != nil {
		s.metrics.tokens(len(res.PromptTokens), res.GeneratedTokens)
		out := map[string]any{"type": "result", "result": res, "strategy": e.spec.Strategy.Type, "pipeline": e.name, "prompt_texts": res.PromptTexts(pipe.Tokenizer)}
		if genErr != nil {
			out["result_error"] = genErr.Error()
		}
		_ = send(out)
	}
	if genErr != nil {
		if r.Context().Err() != nil {
			return
		}
		if errors.Is(genErr, context.DeadlineExceeded) {
			genErr = errTimeout
		}
		_ = send(map[string]any{"type": "error", "error": asAPIError(genErr)})
		return
	}
	s.log.Info("workbench run", "model", e.name, "generated_tokens", res.GeneratedTokens, "seed", res.Seed, "duration", time.Since(start).String())
}

// workbenchPipeline resolves a run's pipeline: the edited TOML, or the loaded pipeline named.
func (s *Server) workbenchPipeline(body *workbenchRunRequest) (*entry, *core.Pipeline, error) {
	if body.Pipeline != nil {
		e, p, err := s.workbenchEntry(*body.Pipeline)
		if err != nil {
			var es pipeline.Errors
			if errors.As(err, &es) {
				return nil, nil, &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: codeOf("pipeline"), Message: es.Error()}
			}
			return nil, nil, err
		}
		if body.Model != "" {
			e.name = body.Model
		}
		return e, p, nil
	}
	e, err := s.entryOf(body.Model)
	if err != nil {
		return nil, nil, err
	}
	p, err := e.build(&sampling{}, nil)
	if err != nil {
		return nil, nil, err
	}
	return e, p, nil
}

// runningPlugins returns the built-in parts plus those of the declared plugins, each of which
// must be declared exactly as in a loaded pipeline (same name, program, arguments,
// environment, checksum, timeouts and configuration), so that the process the server started
// for it serves the edited pipeline too.
func (s *Server) runningPlugins(declared []pipeline.PluginSpec) (*pipeline.Registry, error) {
	reg := pipeline.Builtins().Clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range declared {
		var from *entry
		var names []string
		for _, e := range s.pipelines {
			for _, q := range e.plugins {
				names = append(names, q.Name)
				if samePlugin(p, q) {
					from = e
				}
			}
		}
		if from == nil {
			sort.Strings(names)
			return nil, badParam("pipeline", "plugins[%d] (%s): the workbench runs only plugins the server started, declared exactly as in a loaded pipeline (running: %s)",
				i, p.Name, strings.Join(names, ", "))
		}
		for _, k := range []pipeline.Kind{pipeline.Processor, pipeline.Stopping, pipeline.Strategy} {
			for _, part := range from.reg.Parts(k) {
				if part.Source == pipeline.PluginSource(p.Name) {
					if err := reg.Register(part); err != nil {
						return nil, badParam("pipeline", "plugins[%d] (%s): %v", i, p.Name, err)
					}
				}
			}
		}
	}
	return reg, nil
}

// samePlugin reports whether two plugin declarations start the same program the same way.
func samePlugin(a, b pipeline.PluginSpec) bool {
	a.Index, b.Index = 0, 0
	return reflect.DeepEqual(a, b)
}
