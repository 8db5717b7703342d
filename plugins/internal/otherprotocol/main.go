// Command otherprotocol is a plugin of a future protocol version: it completes go-plugin's
// handshake announcing version 99, which loom must refuse. It does not use the sdk (whose
// protocol version is fixed), only go-plugin and loom's cookie.
package main

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

type nothing struct{ plugin.NetRPCUnsupportedPlugin }

func (nothing) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }
func (nothing) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{ProtocolVersion: 99, MagicCookieKey: "LOOM_PLUGIN", MagicCookieValue: "d6f1c0de-loom-decoding-plugin"},
		Plugins:         plugin.PluginSet{"loom": nothing{}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
