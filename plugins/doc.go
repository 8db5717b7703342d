// Package plugins is the host side of loom's out-of-process plugins. A pipeline declares each
// plugin in [[plugins]] with the path of its program, its sha256 and optionally args, env, a
// per-call timeout and a config table; Start verifies and starts every declared plugin with
// hashicorp/go-plugin (gRPC only, loom's handshake cookie and protocol version), asks what
// parts it serves and registers them in the pipeline's Registry under
// "<plugin name>.<part name>" — and under the plugin's name alone when it serves one part of a
// kind — so that [[processors]], [[stopping]] and [strategy] use them like built-ins.
//
// # Safety
//
// Nothing undeclared runs. Before each start the binary must exist, be a regular executable
// file, not be writable by group or others, and match its sha256 (go-plugin's SecureConfig,
// checked immediately before exec). It is executed directly, never through a shell, with only
// an allow-listed environment plus the pipeline's env, in its own process group, with a
// parent-death signal (SIGKILL) so that it cannot outlive the host, and with its unix sockets
// in a private directory. Its standard error is read by the host and logged through go-hclog
// under the plugin's name, whatever it contains.
//
// # Failures
//
// Every call carries a deadline (the pipeline's timeout, 5s by default). A plugin that crashes,
// is killed, hangs past its deadline or answers nonsense (wrong lengths, NaN or +Inf logits,
// ids outside the vocabulary) fails the call with an error that names it; the process is
// killed and the next call starts a new one (new go-plugin Client and Cmd), within a restart
// budget.
//
// # Speed
//
// Per step, a processor plugin gets one message on a long-lived gRPC stream for all rows of
// the batch; tokens, text and logits lie in a sealed memory file shared with the plugin (see
// sdk/shm), so the message carries offsets. Processors that declare they need only the token
// history receive no logits and answer with a sparse list of biases and bans; those that need
// only the top candidates receive those.
package plugins
