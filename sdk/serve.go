package sdk

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/loomlm/loom/sdk/pluginpb"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// The handshake loom and its plugins agree on (go-plugin's HandshakeConfig). A plugin built
// against another protocol version is refused at start with an error that says so.
const (
	ProtocolVersion  = 1
	MagicCookieKey   = "LOOM_PLUGIN"
	MagicCookieValue = "d6f1c0de-loom-decoding-plugin"
)

// PluginSetName is the name under which the plugin's service is registered with go-plugin.
const PluginSetName = "loom"

// MaxMessageSize is the gRPC message limit on both sides: a vocabulary or rows sent inline can
// be far larger than gRPC's 4 MiB default.
const MaxMessageSize = 1 << 30

// Log is the plugin's logger. Its lines reach the host's log under the plugin's name, at their
// level. Write nothing to standard output yourself: it carries the handshake (the sdk sends
// stray writes there to standard error).
var Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: hclogKeys}))

// hclogKeys renames slog's keys to the ones go-hclog's JSON format uses, which the host reads.
func hclogKeys(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.MessageKey:
		a.Key = "@message"
	case slog.LevelKey:
		a.Key = "@level"
		a.Value = slog.StringValue(strings.ToLower(a.Value.String()))
	case slog.TimeKey:
		a.Key = "@timestamp"
	}
	return a
}

// stdoutFD is the process's real standard output, kept for the handshake line when the process
// runs as a plugin; descriptor 1 itself then points to standard error, so that stray output of
// the author's code (or of a library) cannot break the handshake.
var stdoutFD = -1

func init() {
	if os.Getenv(MagicCookieKey) != MagicCookieValue {
		return
	}
	fd, err := unix.Dup(1)
	if err != nil {
		return
	}
	unix.CloseOnExec(fd)
	if unix.Dup3(2, 1, 0) != nil {
		unix.Close(fd)
		return
	}
	stdoutFD = fd
}

// ServeProcessor serves one logits processor and does not return.
func ServeProcessor(p Processor) { Serve(p) }

// ServeStopping serves one stopping criterion and does not return.
func ServeStopping(c StoppingCriterion) { Serve(c) }

// ServeStrategy serves one strategy and does not return.
func ServeStrategy(s Strategy) { Serve(s) }

// Serve serves parts, each a Processor, a StoppingCriterion or a Strategy, until the host
// stops the plugin; then it exits the process.
func Serve(parts ...any) {
	srv, err := newServer(parts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loom plugin:", err)
		os.Exit(2)
	}
	if stdoutFD >= 0 {
		os.Stdout = os.NewFile(uintptr(stdoutFD), "/dev/stdout")
	}
	if srv.bell != nil {
		go srv.serveDoorbell()
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  ProtocolVersion,
			MagicCookieKey:   MagicCookieKey,
			MagicCookieValue: MagicCookieValue,
		},
		Plugins: plugin.PluginSet{PluginSetName: &grpcPlugin{srv: srv}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			opts = append(opts, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize))
			return grpc.NewServer(opts...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Warn, JSONFormat: true}),
	})
	srv.close()
	os.Exit(0)
}

// grpcPlugin adapts the server to go-plugin.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *server
}

func (p *grpcPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	p.srv.broker = broker
	pluginpb.RegisterPluginServer(s, p.srv)
	return nil
}

func (p *grpcPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("the sdk serves plugins; hosts use loom's plugins package")
}
