// Package inject gives an agent what Hindsight learned, in small, marked and
// bounded doses: a query_hindsight tool answered by the sidecar, a few lines
// of lessons appended to the server's instructions, and a short lessons
// block appended to failed tool results.
//
// An Injector works on the raw JSON of the results the proxy hands it: it
// adds its text and leaves every other byte as the server sent it. It never
// touches structuredContent, never turns a daemon failure into a protocol
// error, and never holds a response longer than the proxy's hook timeout.
package inject

import (
	"context"
	"log/slog"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

// Searcher finds the experiences that matter for a query. The daemon's
// client implements it.
type Searcher interface {
	Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error)
}

// Defaults of the Injector's caps.
const (
	DefaultSessionBudget         = 1000 // tokens injected per session, all channels together
	DefaultMaxExperiences        = 3    // per query_hindsight answer
	DefaultMaxTokensPerLesson    = 200  // per experience in a query_hindsight answer
	DefaultMaxTokensPerLine      = 80   // per lesson line in the instructions or on an error result
	DefaultMaxErrorLessons       = 2    // per failed tool result
	DefaultMaxInstructionLessons = 3    // in the initialize instructions
	DefaultQueryTimeout          = 2 * time.Second
	// DefaultMinConfidence is the injection gate: the confidence an
	// experience needs to reach the instructions or an error result
	// unasked (reflect.DefaultInjectConfidence: two supporting tasks, or
	// one that the error text itself grounds).
	DefaultMinConfidence = 0.6
	// DefaultTemplateMatch is how well an error must fit an experience's
	// error template for its lesson to be appended to that error: the
	// share of the template's literal words found at their places in the
	// masked error text (errtemplate.Similarity), with as many words.
	DefaultTemplateMatch = 0.8
	// SeenOnceConfidence is the confidence of a lesson seen in one task
	// (reflect.Confidence(1, 0, false)); see Injector.SeenOnce.
	SeenOnceConfidence = 0.5
	// SeenOnceLiterals is how many literal words an error template needs
	// for a lesson seen once to be appended on its exact fit.
	SeenOnceLiterals  = 4
	DefaultLessonsTTL = 30 * time.Second
)

// retryFailed is how soon a failed lessons search is tried again (the
// daemon may have been starting).
const retryFailed = 500 * time.Millisecond

// QueryToolName is the name of the tool the Injector adds, unless the server
// already has a tool of that name (then a suffix is added: query_hindsight_2…).
const QueryToolName = "query_hindsight"

// FinalMetaKey is the _meta member of a request that says the agent's task
// is finished with it (value true): the sidecar tells the daemon, which
// makes the task final and reflects it without waiting for the idle gap.
const FinalMetaKey = "io.hindsight/final"

// endTaskHint is the sentence of the instructions about FinalMetaKey.
const endTaskHint = `When your task is finished, set "_meta": {"` + FinalMetaKey + `": true} in the params of your last request so its lessons are learned at once.`

// endTaskToolHint is the instructions' sentence with EndTaskTool.
const endTaskToolHint = `When your task is finished, call ` + EndToolName + ` (or set "_meta": {"` + FinalMetaKey + `": true} in the params of your last request) so its lessons are learned at once.`

// Injection channels, as recorded in hindsight.Injection.Channel.
const (
	ChannelInstructions = "instructions"
	ChannelErrorResult  = "error_result"
	ChannelQuery        = "query_hindsight"
)

// An Injector adds Hindsight's lessons to one sidecar's traffic. Set its
// fields before Install; the zero value of every field but Source is a
// working default with all channels on.
//
// Its exported fields are settings only (a switch per channel, a cap or gate
// each, with its default), so there are many; its state is in sessions and
// lessons.
type Injector struct {
	// Source answers searches; usually the daemon's client.
	Source Searcher
	// Server is the wrapped server's name, for Prefetch. Sessions carry
	// their own.
	Server string
	// Namespace of the experiences; "" means hindsight.DefaultNamespace.
	Namespace string

	// NoInstructions, NoErrorResults and NoQueryTool switch a channel off.
	NoInstructions bool
	NoErrorResults bool
	NoQueryTool    bool
	// EndTaskHint adds to the instructions one sentence telling the agent
	// how to end its task explicitly (FinalMetaKey): the sidecar acts on
	// the flag when it is set.
	EndTaskHint bool
	// EndTaskTool adds the trigger_hindsight tool (EndToolName) beside
	// query_hindsight, answered by the sidecar, and says so in the
	// instructions (instead of EndTaskHint's sentence, in one sentence
	// with it).
	EndTaskTool bool
	// EndTaskCheck, when set, is asked before trigger_hindsight is
	// answered: an error (Hindsight's daemon does not answer) makes the
	// answer EndTaskDownText, an error result.
	EndTaskCheck func(ctx context.Context) error

	SessionBudget         int           // 0: DefaultSessionBudget
	MaxExperiences        int           // 0: DefaultMaxExperiences
	MaxTokensPerLesson    int           // 0: DefaultMaxTokensPerLesson
	MaxTokensPerLine      int           // 0: DefaultMaxTokensPerLine
	MaxErrorLessons       int           // 0: DefaultMaxErrorLessons
	MaxInstructionLessons int           // 0: DefaultMaxInstructionLessons
	QueryTimeout          time.Duration // bounds a query_hindsight search; 0: DefaultQueryTimeout
	MinConfidence         float64       // injection gate of the instructions and error results; 0: DefaultMinConfidence
	TemplateMatch         float64       // relevance gate of error results; 0: DefaultTemplateMatch
	// SeenOnce lets a lesson below MinConfidence but at SeenOnceConfidence
	// (one supporting task, no counter-example) reach an error result whose
	// text its error template fits exactly, with SeenOnceLiterals literal
	// words or more; never the instructions. Its line says "seen in 1 task".
	SeenOnce   bool
	LessonsTTL time.Duration // how long prefetched lessons stay fresh; 0: DefaultLessonsTTL

	Logger *slog.Logger // nil: slog.Default()

	sessions sessionTable // what the Injector keeps per proxy session
	lessons  lessonsCache // the top lessons, by server
}

// Install sets the Injector's hooks on h: Initialize, ToolsList, ToolCall
// and ToolResult, and wraps h.Record and h.Exchange (set them first) so
// what was injected is on the exchange that carried it before a recorder
// sees it: in Record, where the proxy calls it, else in Exchange.
func (in *Injector) Install(h *proxy.Hooks) {
	h.Initialize = in.Initialize
	h.ToolsList = in.ToolsList
	h.ToolCall = in.ToolCall
	h.ToolResult = in.ToolResult
	if nextRecord := h.Record; nextRecord != nil {
		h.Record = func(exs []*proxy.Exchange) {
			for _, ex := range exs {
				in.Record(ex)
			}
			nextRecord(exs)
		}
	}
	next := h.Exchange
	h.Exchange = func(ex *proxy.Exchange) {
		in.Record(ex)
		if next != nil {
			next(ex)
		}
	}
}

func (in *Injector) logger() *slog.Logger {
	if in.Logger != nil {
		return in.Logger
	}
	return slog.Default()
}

func (in *Injector) namespace() string {
	if in.Namespace != "" {
		return in.Namespace
	}
	return hindsight.DefaultNamespace
}

// paramsKey identifies a tools/call request's params, to match a local
// answer with its exchange.
func paramsKey(request []byte) string { return gjson.GetBytes(request, "params").Raw }
