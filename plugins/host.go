package plugins

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/sdk/pluginpb"
)

// Transport chooses how step data reaches processor plugins.
type Transport int

const (
	// SharedMemory puts tokens, text and logits in a memory file shared with the plugin and
	// hands each step over through a mailbox in it, woken by a pipe (the doorbell). A plugin
	// without doorbell support gets each step on the gRPC stream, one without shared memory
	// support everything inline. The default.
	SharedMemory Transport = iota
	// GRPC sends everything inside the gRPC messages (for comparison, and for plugins that
	// cannot map memory).
	GRPC
	// SharedMemoryStream is SharedMemory without the doorbell: each step is a message on the
	// gRPC stream (for comparison).
	SharedMemoryStream
)

// Options configure a Host. The zero value is usable.
type Options struct {
	// Logger receives the plugins' logs, each under "plugin.<name>"; nil logs to standard
	// error at level Info.
	Logger hclog.Logger
	// Timeout is the per-call deadline of plugins whose [[plugins]] entry sets none (5s).
	Timeout time.Duration
	// StartTimeout bounds the start-up, handshake included, of plugins whose [[plugins]] entry
	// sets no start_timeout (10s).
	StartTimeout time.Duration
	// MaxRestarts is how many times a failed plugin is restarted within RestartWindow before
	// loom gives up on it (5 within a minute).
	MaxRestarts   int
	RestartWindow time.Duration
	// EnvAllow lists the variables of loom's own environment a plugin receives; nil means
	// DefaultEnvAllow. The pipeline's env is added to them.
	EnvAllow []string
	// Transport selects shared memory (default) or plain gRPC.
	Transport Transport
}

// DefaultEnvAllow is the part of loom's environment plugins see: enough to run a program and
// find its locale, nothing that usually holds secrets.
var DefaultEnvAllow = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TMPDIR"}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "loom", Output: os.Stderr, Level: hclog.Info})
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.MaxRestarts <= 0 {
		o.MaxRestarts = 5
	}
	if o.RestartWindow <= 0 {
		o.RestartWindow = time.Minute
	}
	if o.EnvAllow == nil {
		o.EnvAllow = DefaultEnvAllow
	}
}

// Host runs the plugins of one pipeline. Close stops them all.
type Host struct {
	opts    Options
	sockDir string
	plugins []*Plugin

	closeOnce sync.Once
}

// Starter returns a pipeline.Options.StartPlugins that starts a pipeline's plugins with opts.
func Starter(opts Options) func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error) {
	return func(spec *pipeline.Spec, reg *pipeline.Registry) (io.Closer, error) {
		h, err := Start(spec, reg, opts)
		if h == nil {
			return nil, err
		}
		return h, err
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// Start starts every plugin the spec declares, configures it with its config table and
// registers its parts in reg. Problems are pipeline.Errors placed on the lines of the
// [[plugins]] entries (a bad config key on its own line). On error the returned Host (when not
// nil) must still be closed.
func Start(spec *pipeline.Spec, reg *pipeline.Registry, opts Options) (*Host, error) {
	opts.defaults()
	h := &Host{opts: opts}
	errs := errorList{spec: spec}
	seen := map[string]bool{}
	var todo []*Plugin
	for _, ps := range spec.Plugins {
		path := fmt.Sprintf("plugins[%d]", ps.Index)
		pl := &Plugin{host: h, spec: ps, name: ps.Name, path: path, timeout: opts.Timeout, startTimeout: opts.StartTimeout}
		switch {
		case !nameRE.MatchString(ps.Name):
			errs.add(path+".name", " = %q: must be letters, digits, _ or -, not starting with a digit", ps.Name)
			continue
		case seen[ps.Name]:
			errs.add(path+".name", " = %q: another plugin has this name", ps.Name)
			continue
		}
		seen[ps.Name] = true
		sum, err := parseSHA256(ps.SHA256)
		if err != nil {
			errs.add(path+".sha256", " = %q: %v", ps.SHA256, err)
			continue
		}
		pl.checksum = sum
		if ps.Timeout != "" {
			d, err := time.ParseDuration(ps.Timeout)
			if err != nil || d <= 0 {
				errs.add(path+".timeout", " = %q: must be a positive duration like \"500ms\" or \"5s\"", ps.Timeout)
				continue
			}
			pl.timeout = d
		}
		if ps.StartTimeout != "" {
			d, err := time.ParseDuration(ps.StartTimeout)
			if err != nil || d <= 0 {
				errs.add(path+".start_timeout", " = %q: must be a positive duration like \"500ms\" or \"30s\"", ps.StartTimeout)
				continue
			}
			pl.startTimeout = d
		}
		if pl.bin, err = resolvePath(ps.Path, spec.Dir); err != nil {
			errs.add(path+".path", ": %v", err)
			continue
		}
		for k := range ps.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				errs.add(path+".env", ": %q is not a valid variable name", k)
			}
		}
		pl.log = opts.Logger.Named("plugin." + ps.Name)
		todo = append(todo, pl)
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	if len(todo) == 0 {
		return h, nil
	}
	if err := h.makeSocketDir(); err != nil {
		return nil, err
	}
	// Start them side by side: start-up is mostly waiting.
	startErrs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, pl := range todo {
		h.plugins = append(h.plugins, pl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			startErrs[i] = pl.firstStart()
		}()
	}
	wg.Wait()
	for i, pl := range todo {
		if err := startErrs[i]; err != nil {
			var cerrs configErrors
			if errors.As(err, &cerrs) {
				for _, ce := range cerrs {
					p := pl.path + ".config"
					if ce.Key != "" {
						p += "." + ce.Key
					}
					if strings.HasPrefix(ce.Message, "= ") {
						errs.add(p, " %s", ce.Message)
					} else {
						errs.add(p, ": %s", ce.Message)
					}
				}
				continue
			}
			field := pl.path
			var fe *fieldError
			if errors.As(err, &fe) {
				field += "." + fe.field
			}
			errs.add(field, ": %v", err)
			continue
		}
		if err := pl.register(reg); err != nil {
			errs.add(pl.path+".name", ": %v", err)
		}
	}
	if err := errs.err(); err != nil {
		return h, err
	}
	return h, nil
}

// Plugins returns the host's plugins in declaration order.
func (h *Host) Plugins() []*Plugin { return h.plugins }

// Close stops every plugin (gracefully, then by force) and removes the socket directory.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, pl := range h.plugins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pl.close()
			}()
		}
		wg.Wait()
		if h.sockDir != "" {
			_ = os.RemoveAll(h.sockDir)
		}
	})
	return nil
}

// socketDirPrefix names the private socket directories: loom-plugins-<pid>-<random>.
const socketDirPrefix = "loom-plugins-"

// makeSocketDir creates the host's private directory for plugin sockets (mode 0700), after
// removing those left by loom processes that no longer exist (killed hosts cannot clean up).
func (h *Host) makeSocketDir() error {
	removeStaleSocketDirs(os.TempDir())
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", socketDirPrefix, os.Getpid()))
	if err != nil {
		return fmt.Errorf("creating the plugin socket directory: %w", err)
	}
	h.sockDir = dir
	return nil
}

func removeStaleSocketDirs(tmp string) {
	matches, _ := filepath.Glob(filepath.Join(tmp, socketDirPrefix+"*-*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), socketDirPrefix)
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		var st syscall.Stat_t
		if syscall.Lstat(m, &st) != nil || int(st.Uid) != os.Getuid() || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(m)
		}
	}
}

// errorList collects pipeline errors against a spec.
type errorList struct {
	spec *pipeline.Spec
	errs pipeline.Errors
}

func (l *errorList) add(path, format string, args ...any) {
	l.errs = append(l.errs, &pipeline.Error{File: l.spec.File, Line: l.spec.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	sort.SliceStable(l.errs, func(i, j int) bool { return l.errs[i].Line < l.errs[j].Line })
	return l.errs
}

// fieldError is an error about one field of a [[plugins]] entry.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// configErrors are a plugin's answers to Configure.
type configErrors []*pluginpb.ConfigError

func (c configErrors) Error() string {
	parts := make([]string, len(c))
	for i, e := range c {
		parts[i] = e.Key + ": " + e.Message
	}
	return strings.Join(parts, "; ")
}
