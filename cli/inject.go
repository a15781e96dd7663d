package cli

import (
	"github.com/hindsight-proxy/hindsight/inject"
)

// newInjector is the injection of the server called name, configured by
// the inject section of the configuration (the sidecar gives it its
// source, the daemon's client).
func newInjector(g *globals, name string) *inject.Injector {
	c := g.config.Inject
	off := func(b *bool) bool { return b != nil && !*b }
	return &inject.Injector{
		Namespace:      sidecarNamespace(g, name),
		NoInstructions: off(c.Instructions),
		NoErrorResults: off(c.ErrorResults),
		SeenOnce:       !off(c.SeenOnce),
		NoQueryTool:    off(c.QueryTool),
		EndTaskHint:    !off(c.EndTask),
		EndTaskTool:    endTaskTool(c.EndTask, c.EndTaskTool, c.QueryTool),
		SessionBudget:  c.SessionBudget,
		MaxExperiences: c.MaxExperiences,
	}
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
