// Command everything is the MCP server the conformance comparison test
// (e2e/conformance) runs the official conformance suite against, directly
// and through `hindsight serve`. It implements the tools, resources and
// prompts the suite's server scenarios call (their names, arguments and
// answers as the scenarios' requirement texts and checks state them), on
// the go-sdk. Every scored scenario of both requirement sets passes
// against it; the tasks extension's do not (the go-sdk has no tasks).
//
// It serves Streamable HTTP on one loopback listener at two paths:
//
//	/mcp            stateful: sessions, server-to-client requests
//	                (sampling, elicitation), resumable SSE streams; for the
//	                2025-11-25 revision and older clients
//	/stateless/mcp  stateless (2026-07-28): no sessions, per-request _meta,
//	                input-required results instead of server requests
//
// Once listening it prints one line, "everything: listening on
// http://ADDR", on stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// watchedURI is the resource whose updates subscribers are told of.
const watchedURI = "test://watched-resource"

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	flag.Parse()
	if err := run(*listen); err != nil {
		log.Fatal(err)
	}
}

// run serves until SIGINT or SIGTERM.
func run(addr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := newServer()
	go announceUpdates(ctx, srv)

	same := func(*http.Request) *mcp.Server { return srv }
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(same, &mcp.StreamableHTTPOptions{
		EventStore: mcp.NewMemoryEventStore(nil),
	}))
	mux.Handle("/stateless/mcp", mcp.NewStreamableHTTPHandler(same, &mcp.StreamableHTTPOptions{
		Stateless: true,
	}))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	fmt.Printf("everything: listening on http://%s\n", ln.Addr())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(shut)
	}()
	if err := hs.Serve(ln); err != http.ErrServerClosed {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// newServer returns the server with every tool, resource and prompt the
// scenarios call.
func newServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hindsight-conformance-everything", Version: "1.0.0"}, &mcp.ServerOptions{
		CompletionHandler: complete,
		// Subscriptions are kept by the go-sdk; the handlers only accept them.
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	addContentTools(srv)
	addClientTools(srv)
	addInputRequiredTools(srv)
	addResources(srv)
	addPrompts(srv)
	return srv
}

// announceUpdates tells subscribers of the watched resource that it changed,
// every 3 seconds, until ctx ends.
func announceUpdates(ctx context.Context, srv *mcp.Server) {
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI})
		}
	}
}
