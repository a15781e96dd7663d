package memory

import (
	"strings"

	"github.com/hindsight-proxy/hindsight"
)

// Provenance filters: which experiences came from where (Experience.Origin:
// "rules", "llm" or "llm:MODEL", "import" or "import:PACK", "manual") and
// from which agent (Experience.SourceAgent) on which machine
// (Experience.SourceMachine).

// Provenance selects experiences by origin and source agent; empty fields
// match anything.
type Provenance struct {
	// Origin "import" matches "import" and every "import:PACK"; a value
	// with a colon ("import:team-pack", "llm:gpt-4o") matches exactly.
	Origin string `json:"origin,omitempty"`
	// SourceAgent matches Experience.SourceAgent exactly.
	SourceAgent string `json:"source_agent,omitempty"`
	// SourceMachine matches Experience.SourceMachine exactly, or its
	// host part when it has no "/" ("build-7" matches "build-7/3fa2c1d0").
	SourceMachine string `json:"source_machine,omitempty"`
}

// Empty reports whether p matches anything.
func (p Provenance) Empty() bool {
	return p.Origin == "" && p.SourceAgent == "" && p.SourceMachine == ""
}

// Match reports whether e is selected.
func (p Provenance) Match(e *hindsight.Experience) bool {
	if p.SourceAgent != "" && e.SourceAgent != p.SourceAgent {
		return false
	}
	if p.SourceMachine != "" && e.SourceMachine != p.SourceMachine {
		host, _, _ := strings.Cut(e.SourceMachine, "/")
		if strings.Contains(p.SourceMachine, "/") || host != p.SourceMachine {
			return false
		}
	}
	switch {
	case p.Origin == "":
		return true
	case strings.Contains(p.Origin, ":"):
		return e.Origin == p.Origin
	}
	kind, _, _ := strings.Cut(e.Origin, ":")
	return kind == p.Origin
}

// SearchRequest is the body of POST /v1/experiences/search: a query, and
// provenance filters applied to its results.
type SearchRequest struct {
	hindsight.Query
	Provenance
}

// provenanceQuery reads ?origin=, ?agent= and ?machine=.
func provenanceQuery(get func(string) string) Provenance {
	return Provenance{Origin: get("origin"), SourceAgent: get("agent"), SourceMachine: get("machine")}
}

// filterExperiences keeps what p selects, at most limit (0: all).
func filterExperiences(list []hindsight.Experience, p Provenance, limit int) []hindsight.Experience {
	out := list[:0]
	for i := range list {
		if p.Match(&list[i]) {
			out = append(out, list[i])
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out
}
