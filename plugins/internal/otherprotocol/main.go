// Command otherprotocol is a plugin of a future protocol version: it completes go-plugin's
// handshake announcing version 99, which loom must refuse.
package main

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"github.com/loomlm/loom/sdk"
	"google.golang.org/grpc"
)

type nothing struct{ plugin.NetRPCUnsupportedPlugin }

func (nothing) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }
func (nothing) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{ProtocolVersion: 99, MagicCookieKey: sdk.MagicCookieKey, MagicCookieValue: sdk.MagicCookieValue},
		Plugins:         plugin.PluginSet{sdk.PluginSetName: nothing{}},
		GRPCServer:      plugin.DefaultGRPCServer,
	})
}
