// Package sidecar assembles and runs what sits between an agent and one MCP
// server: the relay (proxy) with Hindsight's stages on it, as `hindsight
// wrap` (RunStdio) and `hindsight serve` (Serve) run them. The command line
// fills a Config from its flags, the configuration file and the
// environment; this package reads none of them.
//
// A step goes, from the agent's request to the daemon:
//
//	proxy    relays the bytes and hands each finished exchange to the Hooks
//	         the sidecar built: tool pinning, injection, sessions, capture,
//	         task ends, tracing, in that order (see New);
//	capture  redacts the exchange and builds its step, off the relay's path
//	         (on stdio, journaled before the agent has its answer);
//	spool    the outbox: keeps the step on disk until the daemon has it;
//	daemon   the deliverer here sends it over the daemon's socket; the
//	         keeper starts a daemon that does not answer, then drains what
//	         dead sidecars left.
//
// The sidecar also ends what the agent ends: an HTTP session closed, a
// request that says its task is finished (inject.FinalMetaKey) or a call
// of trigger_hindsight tells the daemon, after the steps they follow; a
// daemon that does not answer finds the end noted in the outbox instead.
// Nothing here may break or stall the relay: a sidecar whose capture
// cannot start relays without recording.
package sidecar
