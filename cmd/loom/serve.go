package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/pipelines"
	"github.com/loomlm/loom/server"
	"github.com/loomlm/loom/server/batch"
)

func init() {
	register(&command{name: "serve", summary: "serve pipelines over HTTP with the OpenAI API (default: the example pipelines)", run: runServe})
}

// runServe runs the OpenAI-compatible server until SIGINT or SIGTERM, then drains it.
func runServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "[flags] [PIPELINE.toml…]", stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	maxRunning := fs.Int("max-running", 16, "requests generating at once")
	maxQueue := fs.Int("max-queue", 64, "requests waiting for a slot before the server answers 429")
	maxBody := fs.Int64("max-body-bytes", 4<<20, "largest request body (413 beyond)")
	timeout := fs.Duration("timeout", 5*time.Minute, "per-request generation timeout (504 beyond)")
	drain := fs.Duration("drain-timeout", time.Minute, "on SIGTERM, how long to let requests in flight finish")
	drainDelay := fs.Duration("drain-delay", 0, "on SIGTERM, keep accepting requests this long with /ready answering 503, so load balancers stop routing here first")
	window := fs.Duration("batch-window", batch.DefaultWindow, "how long a batching step waits for the other running requests")
	chunk := fs.Int("chunk-tokens", batch.DefaultChunkTokens, "prompt tokens prefilled per step (long prompts take several steps)")
	logJSON := fs.Bool("log-json", false, "write logs as JSON lines")
	model := fs.String("model", "", "GGUF model file replacing every pipeline's [model]")
	noMmap := fs.Bool("no-mmap", false, noMmapUsage)
	reserveKV := fs.Bool("kv-reserve", true, "at startup, allocate and fault in the KV cache that --max-running requests of each model's full context fill (within its KV budget), as llama-server allocates its cache, so that no request waits for fresh memory; false lets the cache grow as requests need it")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	var bad string
	switch {
	case *chunk < 1:
		bad = fmt.Sprintf("--chunk-tokens %d: must be at least 1", *chunk)
	case *window <= 0:
		bad = fmt.Sprintf("--batch-window %v: must be positive (how long a step waits for the other running requests)", *window)
	case *maxRunning < 1:
		bad = fmt.Sprintf("--max-running %d: must be at least 1", *maxRunning)
	case *maxQueue < 0:
		bad = fmt.Sprintf("--max-queue %d: must be at least 0 (0: no queue, 429 whenever every slot is busy)", *maxQueue)
	case *maxBody < 1:
		bad = fmt.Sprintf("--max-body-bytes %d: must be at least 1", *maxBody)
	case *timeout <= 0:
		bad = fmt.Sprintf("--timeout %v: must be positive", *timeout)
	case *drain <= 0:
		bad = fmt.Sprintf("--drain-timeout %v: must be positive", *drain)
	case *drainDelay < 0:
		bad = fmt.Sprintf("--drain-delay %v: must not be negative", *drainDelay)
	}
	if bad != "" {
		fmt.Fprintf(stderr, "loom serve: %s\n", bad)
		return errUsage
	}
	queue := *maxQueue
	if queue == 0 {
		queue = -1 // server.Options: no queue
	}
	// Listen first: a taken or malformed address fails before the models load.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", *addr, err)
	}
	defer ln.Close()
	log := hclog.New(&hclog.LoggerOptions{Name: "loom-serve", Output: stderr, JSONFormat: *logJSON, Level: hclog.Info})
	s := server.New(server.Options{MaxRunning: *maxRunning, MaxQueue: queue, MaxBodyBytes: *maxBody, Timeout: *timeout,
		BatchWindow: *window, ChunkTokens: *chunk, ReserveKV: *reserveKV, StartPlugins: startPlugins, Logger: log})
	defer s.Close()
	if err := loadServed(s, pos, *model, *noMmap, log); err != nil {
		return err
	}

	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("listening", "url", "http://"+ln.Addr().String(), "pipelines", strings.Join(s.Names(), ","))

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	s.Drain()
	if *drainDelay > 0 {
		log.Info("draining: /ready answers 503", "delay", drainDelay.String())
		time.Sleep(*drainDelay)
	}
	log.Info("shutting down: refusing new requests, draining those in flight", "timeout", drain.String())
	dctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	if err := hs.Shutdown(dctx); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// loadServed loads the pipeline files given, or with none the example pipelines built into
// loom (on the embedded default model); model, when set, replaces every pipeline's [model],
// and noMmap sets mmap = false on every model and draft model. An example pipeline that does
// not load on model (the speculative ones pair it with the embedded draft, whose vocabulary
// another model's need not share) is left out with a warning in log; a pipeline file given
// that does not load is an error, as is a model on which no example loads.
func loadServed(s *server.Server, files []string, model string, noMmap bool, log hclog.Logger) error {
	type source struct{ name, file string }
	var srcs []source
	for _, f := range files {
		srcs = append(srcs, source{strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), f})
	}
	if len(files) == 0 {
		names, err := fs.Glob(pipelines.Files, "*.toml")
		if err != nil {
			return err
		}
		for _, n := range names {
			srcs = append(srcs, source{strings.TrimSuffix(n, ".toml"), "pipelines/" + n})
		}
	}
	if model != "" {
		abs, err := filepath.Abs(model)
		if err != nil {
			return fmt.Errorf("--model: %w", err)
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("--model: %w", err)
		}
		model = abs
	}
	loaded := 0
	var firstErr error
	for _, src := range srcs {
		var spec *pipeline.Spec
		var err error
		if len(files) > 0 {
			spec, err = pipeline.Load(src.file)
		} else {
			var b []byte
			if b, err = pipelines.Files.ReadFile(path.Base(src.file)); err == nil {
				spec, err = pipeline.Parse(src.file, b)
			}
		}
		if err != nil {
			return err
		}
		if model != "" {
			spec.Model.Path, spec.Model.Builtin = model, ""
		}
		if noMmap {
			spec.SetModelsOption("mmap", false)
		}
		if err := s.Add(src.name, spec); err != nil {
			if len(files) > 0 || model == "" {
				return err
			}
			log.Warn("example pipeline left out: it does not load on --model", "pipeline", src.name, "error", err.Error())
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		loaded++
	}
	if loaded == 0 && firstErr != nil {
		return firstErr
	}
	return nil
}
