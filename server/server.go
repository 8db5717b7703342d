// Package server serves loom pipelines over HTTP with the OpenAI API: POST /v1/completions,
// POST /v1/chat/completions, GET /v1/models, plus /health, /ready and /metrics (Prometheus).
//
// Every loaded pipeline is a model of the API, addressed by its name. A request's sampling
// fields (temperature, top_p, penalties, logit_bias, stop, …) become a per-request pipeline built
// from the loaded pipeline's spec, so a request that sets temperature behaves like
// `loom run --temperature` and never changes what other requests see. All requests on one model
// share it through a batching wrapper (package server/batch): the concurrent sessions advance
// in one batched forward per step.
package server

import (
	"errors"
	"fmt"
	"github.com/loomlm/loom/chat"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/server/batch"
)

// Options configure a Server. Zero values take the defaults named.
type Options struct {
	// MaxRunning is the most requests generating at once (default 16); MaxQueue the most
	// waiting for a slot (default 64; negative: none, so that a request finding every slot
	// busy is answered at once). A request beyond both gets 429 with Retry-After.
	MaxRunning, MaxQueue int
	// MaxBodyBytes limits a request body (default 4 MiB); a larger one gets 413.
	MaxBodyBytes int64
	// Timeout bounds one request's generation (default 5 minutes); past it the request fails
	// with 504 (or an error event when streaming).
	Timeout time.Duration
	// BatchWindow is how long a batching step waits for the other running sessions;
	// ChunkTokens the prefill chunk (defaults batch.DefaultWindow, batch.DefaultChunkTokens).
	BatchWindow time.Duration
	ChunkTokens int
	// ReserveKV has every model the server opens reserve, at load, the KV cache that
	// MaxRunning requests of its full context fill, within the model's KV budget (models that
	// can: loom's runtime, llama.Model.ReserveKV), so that no request's forward pass waits for
	// fresh memory to be faulted in.
	ReserveKV bool
	// StartPlugins starts the plugins a pipeline declares (once, at load).
	StartPlugins func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error)
	// Logger receives request logs (default: none).
	Logger hclog.Logger
}

// Server is an http.Handler serving loaded pipelines.
type Server struct {
	opts     Options
	mux      *http.ServeMux
	adm      *admission
	metrics  *metrics
	log      hclog.Logger
	draining atomic.Bool
	closed   atomic.Bool // set by Close: requests and Add fail from then on
	ids      atomic.Uint64

	mu        sync.Mutex
	pipelines map[string]*entry
	models    map[string]*sharedModel
	closers   []io.Closer
}

// entry is one loaded pipeline.
type entry struct {
	name    string
	spec    *pipeline.Spec // built with the shared models in place of its model tables
	reg     *pipeline.Registry
	model   *sharedModel
	draft   *sharedModel // the draft model, or nil
	created int64
	// plugins are the plugins the pipeline declared, started by the server at load.
	plugins []pipeline.PluginSpec
}

// sharedModel is one opened model, shared by every pipeline that declares it.
type sharedModel struct {
	raw     core.Model
	batched *batch.Model
	tok     core.Tokenizer
	// kv admits requests by the cache blocks they may fill, for models whose cache reports its
	// size (loom's runtime); nil otherwise.
	kv *kvGate

	// The model's chat template, parsed on first use.
	tplOnce sync.Once
	tpl     *chat.Template
	tplErr  error
}

// New returns a Server with no pipelines; add them with Load or Add.
func New(opts Options) *Server {
	if opts.MaxRunning <= 0 {
		opts.MaxRunning = 16
	}
	switch {
	case opts.MaxQueue == 0:
		opts.MaxQueue = 64
	case opts.MaxQueue < 0:
		opts.MaxQueue = 0
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), adm: newAdmission(opts.MaxRunning, opts.MaxQueue),
		log: opts.Logger, pipelines: map[string]*entry{}, models: map[string]*sharedModel{}}
	s.metrics = newMetrics(s)
	s.mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /v1/models/{model...}", s.handleModel)
	s.mux.HandleFunc("POST /tokenize", s.handleTokenize)
	s.mux.HandleFunc("POST /detokenize", s.handleDetokenize)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /ready", s.handleReady)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.registerWorkbench()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.closed.Load() && r.URL.Path != "/health" {
		writeError(w, errServerClosed)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// errServerClosed answers the requests a server gets after its Close: its models are closed.
var errServerClosed = &APIError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: codeOf("server_closed"),
	Message: "the server is closed: its models and plugins are released"}

// Load loads a pipeline file under its file name without extension ("pipelines/greedy.toml"
// is model "greedy").
func (s *Server) Load(path string) error {
	spec, err := pipeline.Load(path)
	if err != nil {
		return err
	}
	return s.Add(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), spec)
}

// Add loads a parsed pipeline under name: it opens (or shares) its models, starts its plugins
// and builds it once to check it.
func (s *Server) Add(name string, spec *pipeline.Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return fmt.Errorf("%s: the server is closed", spec.File)
	}
	if _, dup := s.pipelines[name]; dup {
		return fmt.Errorf("%s: a pipeline named %q is already loaded", spec.File, name)
	}
	// What this call starts or opens is released again if it fails: a pipeline left out (an
	// example that does not load on --model, say) holds no plugin process, model or KV cache.
	closers, models := len(s.closers), maps.Clone(s.models)
	if err := s.add(name, spec); err != nil {
		for i := len(s.closers) - 1; i >= closers; i-- {
			_ = s.closers[i].Close()
		}
		s.closers = s.closers[:closers]
		s.models = models
		return err
	}
	return nil
}

// add is Add with s.mu held, leaving what it started to Add on failure.
func (s *Server) add(name string, spec *pipeline.Spec) error {
	e := &entry{name: name, created: time.Now().Unix(), reg: pipeline.Builtins().Clone(), plugins: spec.Plugins}
	c := *spec
	if len(spec.Plugins) > 0 {
		if s.opts.StartPlugins == nil {
			return fmt.Errorf("%s: declares plugins, and this server cannot start them", spec.File)
		}
		closer, err := s.opts.StartPlugins(spec, e.reg)
		if closer != nil {
			s.closers = append(s.closers, closer)
		}
		if err != nil {
			return err
		}
		c.Plugins = nil
	}
	m, err := s.share(spec.Model, spec)
	if err != nil {
		return err
	}
	e.model = m
	if spec.DraftModel != nil {
		if e.draft, err = s.share(*spec.DraftModel, spec); err != nil {
			return err
		}
	}
	e.spec = &c
	b, err := pipeline.Build(clone(e.spec), e.options())
	if err != nil {
		return err
	}
	_ = b.Close()
	s.pipelines[name] = e
	return nil
}

// options are the build options of e's pipelines: its registry and the shared models, which
// the pipelines use in place of their model tables and do not close.
func (e *entry) options() pipeline.Options {
	o := pipeline.Options{Registry: e.reg, Model: e.model.batched, Tokenizer: e.model.tok}
	if e.draft != nil {
		// The draft's tokenizer writes as text the control tokens the target's does
		// (controlText), so that the two read alike.
		o.DraftModel, o.DraftTokenizer = e.draft.batched, e.draft.tok
		if ct, ok := e.model.tok.(*controlText); ok {
			o.DraftTokenizer = ct.over(e.draft.tok)
		}
	}
	return o
}

// modelKey identifies a model declaration: the same key is the same model.
func modelKey(ms pipeline.ModelSpec, spec *pipeline.Spec) (string, error) {
	key := "builtin:" + ms.Builtin
	if ms.Path != "" {
		p := ms.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(spec.Dir, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		key = "file:" + abs
	}
	return key + fmt.Sprint(ms.Options), nil // fmt prints maps sorted
}

// share opens the model ms declares, or returns the one already open with the same
// declaration.
func (s *Server) share(ms pipeline.ModelSpec, spec *pipeline.Spec) (*sharedModel, error) {
	key, err := modelKey(ms, spec)
	if err != nil {
		return nil, err
	}
	if m, ok := s.models[key]; ok {
		return m, nil
	}
	raw, tok, closer, err := pipeline.OpenModel(ms, spec.Dir)
	if closer != nil {
		s.closers = append(s.closers, closer)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: model: %w", spec.File, err)
	}
	if r, ok := raw.(interface{ ReserveKV(sequences int) int64 }); ok && s.opts.ReserveKV {
		start := time.Now()
		n := r.ReserveKV(s.opts.MaxRunning)
		name := ms.Path
		if name == "" {
			name = "builtin " + ms.Builtin
		}
		s.log.Info("reserved KV cache", "pipeline", spec.File, "model", name, "sequences", s.opts.MaxRunning,
			"MiB", fmt.Sprintf("%.1f", float64(n)/(1<<20)), "took", time.Since(start).Round(time.Millisecond).String())
	}
	if src, ok := chatTemplate(raw); ok {
		tok = withControlText(tok, src) // a tool-call format's control tokens, as text
	}
	m := &sharedModel{raw: raw, tok: tok,
		batched: batch.New(raw, batch.Options{Window: s.opts.BatchWindow, ChunkTokens: s.opts.ChunkTokens, OnStep: s.metrics.step})}
	if c, ok := raw.(interface{ Cache() *cache.Pool }); ok && c.Cache() != nil {
		m.kv = newKVGate(c.Cache().Stats().MaxBlocks, c.Cache().Config().BlockSize)
	}
	s.closers = append(s.closers, m.batched)
	s.models[key] = m
	return m, nil
}

// Names lists the loaded pipelines.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.pipelines))
	for n := range s.pipelines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *Server) lookup(name string) (*entry, error) {
	s.mu.Lock()
	e, ok := s.pipelines[name]
	s.mu.Unlock()
	if !ok {
		return nil, &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: codeOf("model"), Code: codeOf("model_not_found"),
			Message: fmt.Sprintf("model %q: no such pipeline (loaded: %s)", name, strings.Join(s.Names(), ", "))}
	}
	return e, nil
}

// Drain marks the server as shutting down: /ready answers 503 from now on, so a load balancer
// stops sending requests, while requests in flight finish (http.Server.Shutdown waits for them).
func (s *Server) Drain() { s.draining.Store(true) }

// Close releases every model and plugin. Call it after the HTTP server has shut down: from
// then on every request but /health is answered 503 (code server_closed), and Add fails.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed.Store(true)
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	return errors.Join(errs...)
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	if len(s.Names()) == 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "no pipelines loaded"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
