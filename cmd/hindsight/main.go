// Command hindsight is a sidecar proxy that gives AI agents hindsight: it
// sits between an agent and its MCP servers, records every tool call,
// learns lessons from finished tasks and gives them back.
//
// This is the lean build that agents start once per MCP server (wrap,
// serve) and users run (status, traces, experiences, demo…). It leaves out
// the Weaviate and OpenAI-compatible clients and the OTLP trace exporters;
// when the daemon's configuration needs one of the clients, "hindsight
// daemon" runs hindsightd instead, and so does a sidecar when tracing is
// on.
//
// Run "hindsight help" for the commands.
package main

import "github.com/hindsight-proxy/hindsight/cli"

func main() { cli.Main(cli.Backends{}) }
