package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/sdk"
	"github.com/loomlm/loom/sdk/pluginpb"
	"github.com/loomlm/loom/sdk/shm"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Plugin is one declared plugin: its verified binary, the parts it serves and its current
// process, restarted after a failure.
type Plugin struct {
	host     *Host
	spec     pipeline.PluginSpec
	name     string
	path     string // field path in the pipeline: "plugins[2]"
	bin      string
	checksum []byte
	timeout  time.Duration
	// startTimeout bounds a start-up, handshake included.
	startTimeout time.Duration
	log          hclog.Logger

	// mu serialises calls into the plugin and its restarts.
	mu       sync.Mutex
	proc     *process
	parts    []*pluginpb.Part
	config   []byte
	vocab    *pluginpb.Vocabulary
	restarts []time.Time
	starts   int
	closed   bool
	lastErr  error
}

// PartInfo describes a part a plugin serves.
type PartInfo struct {
	Kind pipeline.Kind
	// Name is the part's name inside the plugin; Types the type names pipelines use for it.
	Name  string
	Types []string
	Doc   string
	// Needs is "logits", "top N" or "history" for processors.
	Needs string
}

// Name is the plugin's name in the pipeline.
func (pl *Plugin) Name() string { return pl.name }

// Path is the absolute path of the plugin's program.
func (pl *Plugin) Path() string { return pl.bin }

// PID is the process id of the running plugin process, or 0.
func (pl *Plugin) PID() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.proc == nil || pl.proc.dead.Load() {
		return 0
	}
	return pl.proc.runner.pid()
}

// Starts counts the processes started so far (1 + restarts).
func (pl *Plugin) Starts() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.starts
}

// SharedMemory reports whether the running process maps the shared memory.
func (pl *Plugin) SharedMemory() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.proc != nil && pl.proc.region != nil
}

// Doorbell reports whether the running process takes its steps through the shared memory's
// mailbox rather than the gRPC stream.
func (pl *Plugin) Doorbell() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.proc != nil && pl.proc.bell != nil
}

// Parts lists the parts the plugin serves.
func (pl *Plugin) Parts() []PartInfo {
	counts := map[pluginpb.Kind]int{}
	for _, p := range pl.parts {
		counts[p.Kind]++
	}
	var out []PartInfo
	for _, p := range pl.parts {
		info := PartInfo{Kind: kindOf(p.Kind), Name: p.Name, Doc: p.Doc, Types: []string{pl.name + "." + p.Name}}
		if counts[p.Kind] == 1 {
			info.Types = append([]string{pl.name}, info.Types...)
		}
		if p.Kind == pluginpb.Kind_KIND_PROCESSOR {
			switch p.Needs {
			case pluginpb.Needs_NEEDS_TOP:
				info.Needs = fmt.Sprintf("top %d", p.TopN)
			case pluginpb.Needs_NEEDS_HISTORY:
				info.Needs = "history"
			default:
				info.Needs = "logits"
			}
		}
		out = append(out, info)
	}
	return out
}

func kindOf(k pluginpb.Kind) pipeline.Kind {
	switch k {
	case pluginpb.Kind_KIND_STOPPING:
		return pipeline.Stopping
	case pluginpb.Kind_KIND_STRATEGY:
		return pipeline.Strategy
	}
	return pipeline.Processor
}

// process is one running plugin process.
type process struct {
	pl     *Plugin
	client *plugin.Client
	runner *procRunner
	conn   *grpc.ClientConn
	broker *plugin.GRPCBroker
	rpc    pluginpb.PluginClient
	region *shm.Region // nil when the plugin does not map it
	bell   *hostBell   // nil when steps go through the gRPC stream

	stream       pluginpb.Plugin_StepsClient
	streamCancel context.CancelFunc
	nextID       uint64

	dead     atomic.Bool
	timedOut atomic.Bool
}

// firstStart starts the plugin for the first time, learns its parts and configures it.
func (pl *Plugin) firstStart() error {
	cfg := map[string]any{}
	if pl.spec.Config != nil {
		cfg = pl.spec.Config
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("config: %v", err)
	}
	pl.config = b
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if err := checkBinary(pl.bin); err != nil {
		return &fieldError{"path", pl.errorf("%v", err)}
	}
	if err := verifyChecksum(pl.bin, pl.checksum); err != nil {
		return &fieldError{"sha256", pl.errorf("%v", err)}
	}
	proc, err := pl.startProcess()
	if err != nil {
		return err
	}
	pl.proc = proc
	return nil
}

// startProcess starts a process (a new go-plugin Client and Cmd), checks that it serves the
// parts it served before, and replays the configuration and vocabulary.
func (pl *Plugin) startProcess() (*process, error) {
	if pl.closed {
		return nil, errors.New("the plugin host is closed")
	}
	opts := &pl.host.opts
	proc := &process{pl: pl}
	r := &procRunner{name: pl.name, path: pl.bin, args: pl.spec.Args, checksum: pl.checksum, log: pl.log, tail: &tail{}}
	proc.runner = r
	env := pl.environ()
	if opts.Transport != GRPC {
		region, err := shm.Create("loom-plugin-"+pl.name, 1<<20)
		if err != nil {
			pl.log.Warn("no shared memory; using plain gRPC", "error", err)
		} else {
			proc.region = region
			r.extra = []*os.File{region.File()}
			env = append(env, shm.EnvFD+"=3")
			if bell, theirs, err := newHostBell(); err == nil && opts.Transport == SharedMemory {
				proc.bell = bell
				r.extra = append(r.extra, theirs...)
				r.closeAfterStart = theirs
				env = append(env, shm.EnvDoorbell+"=4,5")
			}
		}
	}
	pl.starts++
	proc.client = plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  sdk.ProtocolVersion,
			MagicCookieKey:   sdk.MagicCookieKey,
			MagicCookieValue: sdk.MagicCookieValue,
		},
		Plugins: plugin.PluginSet{sdk.PluginSetName: &hostPlugin{}},
		RunnerFunc: func(_ hclog.Logger, cmd *exec.Cmd, _ string) (runner.Runner, error) {
			// cmd carries go-plugin's variables (cookie, protocol versions, socket dir); they
			// come last so that a pipeline's env cannot override them.
			r.env = append(env, cmd.Env...)
			return r, nil
		},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           demoted{pl.log.Named("go-plugin")},
		StartTimeout:     pl.startTimeout,
		SyncStdout:       &lineWriter{log: pl.log, tail: r.tail, stream: "stdout"},
		SyncStderr:       &lineWriter{log: pl.log, tail: r.tail, stream: "stderr"},
		SkipHostEnv:      true,
		UnixSocketConfig: &plugin.UnixSocketConfig{TempDir: pl.host.sockDir},
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(sdk.MaxMessageSize), grpc.MaxCallSendMsgSize(sdk.MaxMessageSize))},
	})
	fail := func(what string, err error) (*process, error) {
		err = proc.describeFailure(what, err)
		proc.kill()
		return nil, err
	}
	cp, err := proc.client.Client()
	if err != nil {
		return fail("start", err)
	}
	raw, err := cp.Dispense(sdk.PluginSetName)
	if err != nil {
		return fail("start", err)
	}
	hc := raw.(*hostClient)
	proc.conn, proc.broker, proc.rpc = hc.conn, hc.broker, pluginpb.NewPluginClient(hc.conn)

	ctx, cancel := context.WithTimeout(context.Background(), pl.startTimeout)
	defer cancel()
	desc, err := proc.rpc.Describe(ctx, &pluginpb.DescribeRequest{})
	if err != nil {
		return fail("describe", err)
	}
	if pl.parts == nil {
		if len(desc.Parts) == 0 {
			return fail("describe", errors.New("it serves no parts"))
		}
		pl.parts = desc.Parts
	} else if !sameParts(pl.parts, desc.Parts) {
		return fail("restart", errors.New("the restarted plugin serves other parts than before"))
	}
	if !desc.SharedMemory && proc.region != nil {
		proc.region.Close()
		proc.region = nil
	}
	if (!desc.Doorbell || proc.region == nil) && proc.bell != nil {
		proc.bell.close()
		proc.bell = nil
	}
	if proc.bell != nil {
		proc.bell.wake = proc.region.Features()&shm.FeatureWake != 0
	}
	cr, err := proc.rpc.Configure(ctx, &pluginpb.ConfigureRequest{ConfigJson: pl.config, PluginName: pl.name})
	if err != nil {
		return fail("configure", err)
	}
	if len(cr.Errors) > 0 {
		proc.close()
		return nil, configErrors(cr.Errors)
	}
	if pl.vocab != nil {
		if err := proc.setVocabulary(ctx, pl.vocab); err != nil {
			return fail("vocabulary", err)
		}
	}
	sctx, scancel := context.WithCancel(context.Background())
	proc.streamCancel = scancel
	proc.stream, err = proc.rpc.Steps(sctx)
	if err != nil {
		return fail("open the step stream", err)
	}
	pl.log.Debug("started", "pid", r.pid(), "shared_memory", proc.region != nil, "sdk", desc.Sdk)
	return proc, nil
}

func sameParts(a, b []*pluginpb.Part) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || a[i].Name != b[i].Name || a[i].Needs != b[i].Needs || a[i].TopN != b[i].TopN {
			return false
		}
	}
	return true
}

func (proc *process) setVocabulary(ctx context.Context, v *pluginpb.Vocabulary) error {
	r, err := proc.rpc.SetVocabulary(ctx, v)
	if err != nil {
		return err
	}
	if r.Error != "" {
		return errors.New(r.Error)
	}
	return nil
}

// environ is the plugin's environment: the allow-listed part of loom's, then the pipeline's.
func (pl *Plugin) environ() []string {
	var env []string
	for _, k := range pl.host.opts.EnvAllow {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range pl.spec.Env {
		env = append(env, k+"="+v)
	}
	env = append(env, "LOOM_PLUGIN_NAME="+pl.name)
	return env
}

// acquire returns a running process, restarting the plugin when its last process failed.
// pl.mu must be held.
func (pl *Plugin) acquire() (*process, error) {
	if pl.closed {
		return nil, fmt.Errorf("plugin %q: the plugin host is closed", pl.name)
	}
	if pl.proc != nil && !pl.proc.dead.Load() {
		return pl.proc, nil
	}
	if pl.proc != nil {
		pl.proc.close()
		pl.proc = nil
	}
	now := time.Now()
	window := pl.host.opts.RestartWindow
	kept := pl.restarts[:0]
	for _, t := range pl.restarts {
		if now.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	pl.restarts = kept
	if len(pl.restarts) >= pl.host.opts.MaxRestarts {
		return nil, fmt.Errorf("plugin %q: restarted %d times in %v, not again (last failure: %v)", pl.name, len(pl.restarts), window, pl.lastErr)
	}
	pl.restarts = append(pl.restarts, now)
	pl.log.Info("restarting", "after", pl.lastErr)
	proc, err := pl.startProcess()
	if err != nil {
		pl.lastErr = err
		return nil, fmt.Errorf("plugin %q: restart failed: %w", pl.name, err)
	}
	pl.proc = proc
	return proc, nil
}

// with runs f with a running process, holding the plugin's lock. An error f reports through
// proc.failed marks the process dead: the next call starts a new one.
func (pl *Plugin) with(f func(proc *process) error) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	proc, err := pl.acquire()
	if err != nil {
		return err
	}
	return f(proc)
}

// roundTrip sends one step and waits for its reply, within the plugin's deadline. With a
// doorbell and a mailbox of mailboxCap bytes reserved at the start of the region (0: none),
// the step goes through shared memory; otherwise over the gRPC stream.
func (proc *process) roundTrip(req *pluginpb.StepRequest, mailboxCap uint64) (*pluginpb.StepReply, error) {
	proc.nextID++
	req.Id = proc.nextID
	if proc.region != nil {
		req.ShmSize = uint64(proc.region.Size())
	}
	timer := time.AfterFunc(proc.pl.timeout, func() {
		proc.timedOut.Store(true)
		proc.runner.killGroup()
	})
	var reply *pluginpb.StepReply
	var err error
	if proc.bell != nil && mailboxCap > 0 && uint64(proto.Size(req)) <= mailboxCap {
		reply, err = proc.mailboxTrip(req, mailboxCap)
	} else {
		err = proc.stream.Send(req)
		if err == nil {
			reply, err = proc.stream.Recv()
		}
	}
	timer.Stop()
	if err != nil {
		var m *malformedError
		if errors.As(err, &m) {
			return nil, proc.malformed("%s", m.msg)
		}
		return nil, proc.failed(err)
	}
	if reply.Id != req.Id {
		return nil, proc.malformed("answered step %d to step %d", reply.Id, req.Id)
	}
	if reply.Error != "" {
		return nil, fmt.Errorf("plugin %q: %s", proc.pl.name, clean([]byte(reply.Error)))
	}
	return reply, nil
}

type malformedError struct{ msg string }

func (e *malformedError) Error() string { return e.msg }

// mailboxTrip writes the request into the mailbox, rings, waits for the plugin's ring and
// reads its reply from the mailbox.
func (proc *process) mailboxTrip(req *pluginpb.StepRequest, mailboxCap uint64) (*pluginpb.StepReply, error) {
	reg := proc.region
	buf, err := proto.MarshalOptions{}.MarshalAppend(proc.bell.buf[:0], req)
	if err != nil {
		return nil, err
	}
	proc.bell.buf = buf
	mb, err := reg.Mailbox(len(buf))
	if err != nil {
		return nil, err
	}
	copy(mb, buf)
	reg.SetMailbox(uint64(len(buf)), mailboxCap)
	if err := shm.Ring(proc.bell.req); err != nil {
		return nil, err
	}
	if _, err := shm.Receive(proc.bell.rep, replySpin); err != nil {
		return nil, err
	}
	n, _ := reg.MailboxLen()
	if n > mailboxCap {
		return nil, &malformedError{fmt.Sprintf("a reply of %d bytes in a mailbox of %d", n, mailboxCap)}
	}
	mb, err = reg.Mailbox(int(n))
	if err != nil {
		return nil, &malformedError{err.Error()}
	}
	reply := &pluginpb.StepReply{}
	if err := proto.Unmarshal(mb, reply); err != nil {
		return nil, &malformedError{"undecodable reply: " + err.Error()}
	}
	return reply, nil
}

// replySpin is how long the host polls for a plugin's reply before it sleeps: most steps are
// answered within it, and a thread that never slept needs no wake-up.
const replySpin = 200 * time.Microsecond

// hostBell is the host's ends of the doorbell pipes.
type hostBell struct {
	req, rep int
	buf      []byte
	// wake: the plugin takes a wake-up ring before each step (shm.FeatureWake).
	wake bool
}

// wakeUp rings the plugin's wake-up bell when it takes one: its thread wakes while the host
// writes the step's data. A failure shows at the step's own ring.
func (proc *process) wakeUp() {
	if proc.bell != nil && proc.bell.wake {
		_ = shm.RingWake(proc.bell.req)
	}
}

// newHostBell makes the two pipes; theirs are the plugin's ends, for ExtraFiles (fd 4: it
// reads requests, fd 5: it writes replies), to be closed in the host once it runs.
func newHostBell() (*hostBell, []*os.File, error) {
	var a, b [2]int
	if err := syscall.Pipe2(a[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	if err := syscall.Pipe2(b[:], syscall.O_CLOEXEC); err != nil {
		syscall.Close(a[0])
		syscall.Close(a[1])
		return nil, nil, err
	}
	// The host polls its reply end (see replySpin).
	if err := syscall.SetNonblock(b[0], true); err != nil {
		for _, fd := range append(a[:], b[:]...) {
			syscall.Close(fd)
		}
		return nil, nil, err
	}
	theirs := []*os.File{os.NewFile(uintptr(a[0]), "doorbell-in"), os.NewFile(uintptr(b[1]), "doorbell-out")}
	return &hostBell{req: a[1], rep: b[0]}, theirs, nil
}

func (b *hostBell) close() {
	syscall.Close(b.req)
	syscall.Close(b.rep)
}

// failed records a transport failure: the process is killed and the error says what happened
// to it.
func (proc *process) failed(err error) error {
	if proc.dead.Swap(true) {
		return fmt.Errorf("plugin %q: %w", proc.pl.name, err)
	}
	e := proc.describeFailure("call", err)
	proc.kill()
	proc.pl.lastErr = e
	return e
}

// malformed kills a process that answered nonsense (its state is unknown) and says so.
func (proc *process) malformed(format string, args ...any) error {
	proc.dead.Store(true)
	err := fmt.Errorf("plugin %q: malformed answer: %s", proc.pl.name, fmt.Sprintf(format, args...))
	proc.kill()
	proc.pl.lastErr = err
	return err
}

// describeFailure explains a failed start or call from what is known of the process: how it
// ended, if it did (waiting a moment for it), and its last line of output.
func (proc *process) describeFailure(what string, err error) error {
	name := proc.pl.name
	if proc.timedOut.Load() {
		return fmt.Errorf("plugin %q: no answer within %v: killed it (hung?)", name, proc.pl.timeout)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		// go-plugin kills the process when the handshake times out.
		return fmt.Errorf("plugin %q: %s: did not complete the handshake within %v (the entry's start_timeout): killed it%s", name, what, proc.pl.startTimeout, proc.runner.tailNote())
	case strings.Contains(msg, "Failed to read any lines from plugin's stdout") || strings.Contains(msg, "plugin exited before we could connect"):
		// It ended (or closed its standard output) without a word: its standard error says why.
		status, ok := proc.runner.exitStatus(time.Second)
		if !ok {
			status = "closed its standard output"
		}
		return fmt.Errorf("plugin %q: %s: ended before the handshake (%s)%s", name, what, status, proc.runner.tailNote())
	case strings.Contains(msg, "incompatible API version"):
		return fmt.Errorf("plugin %q: %s: protocol version mismatch: this loom speaks plugin protocol %d (%s); rebuild the plugin against a matching sdk", name, what, sdk.ProtocolVersion, msg)
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		first, _, _ := strings.Cut(strings.TrimPrefix(msg, "Unrecognized remote plugin message: "), "\n")
		return fmt.Errorf("plugin %q: %s: no go-plugin handshake: its first line on standard output was %q (a plugin must print nothing before it; is this a loom plugin?)", name, what, clean([]byte(first)))
	}
	if status, ok := proc.runner.exitStatus(time.Second); ok {
		if last := proc.runner.tail.last(); last != "" {
			status += "; its last output: " + last
		}
		return fmt.Errorf("plugin %q: %s: crashed (%s)", name, what, status)
	}
	return fmt.Errorf("plugin %q: %s: %s", name, what, msg)
}

// kill stops the process at once.
func (proc *process) kill() {
	proc.dead.Store(true)
	proc.runner.killGroup()
	proc.close()
}

// close stops the process: gracefully (go-plugin's Shutdown, up to 2s) when it is healthy,
// then kills whatever is left of its process group and releases the shared memory.
func (proc *process) close() {
	if proc.streamCancel != nil {
		proc.streamCancel()
	}
	if proc.dead.Load() {
		proc.runner.killGroup()
	}
	proc.client.Kill()
	proc.runner.killGroup()
	if proc.region != nil {
		proc.region.Close()
		proc.region = nil
	}
	if proc.bell != nil {
		proc.bell.close()
		proc.bell = nil
	}
	proc.dead.Store(true)
}

// close stops the plugin for good.
func (pl *Plugin) close() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.closed = true
	if pl.proc != nil {
		pl.proc.close()
		pl.proc = nil
	}
}

// errorf prefixes an error with the plugin's name.
func (pl *Plugin) errorf(format string, args ...any) error {
	return fmt.Errorf("plugin %q: %s", pl.name, fmt.Sprintf(format, args...))
}

// lineWriter logs what go-plugin forwards from a Go plugin's os.Stdout and os.Stderr.
type lineWriter struct {
	log    hclog.Logger
	tail   *tail
	stream string
	buf    []byte
	st     logState
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			if len(w.buf) > maxLine {
				w.emit(w.buf[:maxLine])
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) emit(line []byte) {
	if w.stream == "stderr" {
		w.st.log(w.log, w.tail, line)
		return
	}
	logLine(w.log, w.tail, w.stream, line)
}

// hostPlugin is the go-plugin Plugin on the host side: it hands back the raw connection and
// broker, which the part adapters use.
type hostPlugin struct{ plugin.NetRPCUnsupportedPlugin }

type hostClient struct {
	conn   *grpc.ClientConn
	broker *plugin.GRPCBroker
}

func (hostPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("loom hosts plugins; it does not serve as one")
}

func (hostPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &hostClient{conn: conn, broker: broker}, nil
}
