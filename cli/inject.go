package cli

import (
	"context"
	"log/slog"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// installInjector adds Hindsight's injection to h for the server called
// name, configured by the inject section of the configuration, with src
// (the daemon's client) as its source of experiences. It wraps h.Exchange
// to record what it injected, so call it after capture set its hook. It
// starts fetching the server's top lessons at once, so the first
// initialize does not wait for the daemon.
func installInjector(g *globals, name string, src inject.Searcher, h *proxy.Hooks, logger *slog.Logger) *inject.Injector {
	c := g.config.Inject
	off := func(b *bool) bool { return b != nil && !*b }
	inj := &inject.Injector{
		Source:         src,
		Server:         name,
		Namespace:      sidecarNamespace(g, name),
		NoInstructions: off(c.Instructions),
		NoErrorResults: off(c.ErrorResults),
		SeenOnce:       !off(c.SeenOnce),
		NoQueryTool:    off(c.QueryTool),
		EndTaskHint:    !off(c.EndTask),
		EndTaskTool:    endTaskTool(c.EndTask, c.EndTaskTool, c.QueryTool),
		SessionBudget:  c.SessionBudget,
		MaxExperiences: c.MaxExperiences,
		Logger:         logger,
	}
	if c, ok := src.(*daemon.Client); ok && inj.EndTaskTool {
		inj.EndTaskCheck = func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*downCheckTimeout)
			defer cancel()
			_, err := c.Health(ctx)
			return err
		}
	}
	inj.Install(h)
	go inj.Prefetch(context.Background())
	return inj
}

// sidecarNamespace is the namespace of the lessons about the sidecar's
// server: its --namespace, else the configuration's. The steps it records
// carry a --namespace, so the daemon stores their lessons there too.
func sidecarNamespace(g *globals, server string) string {
	if g.namespace != "" {
		return g.namespace
	}
	return g.config.namespaceFor(server)
}

// endTaskTool says whether the sidecar lists trigger_hindsight: with
// inject.end_task on, as inject.end_task_tool says, by default when
// query_hindsight is listed (a sidecar configured to add no tool adds
// none).
func endTaskTool(endTask, endTaskTool, queryTool *bool) bool {
	if endTask != nil && !*endTask {
		return false
	}
	if endTaskTool != nil {
		return *endTaskTool
	}
	return queryTool == nil || *queryTool
}
