package inject

import (
	"context"
	"errors"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
	"github.com/hindsight-proxy/hindsight/internal/defaults"
)

// queryHeader starts a query_hindsight answer that shows experiences.
const queryHeader = Marker + " Past experience with this server, most relevant first:\n\n"

// errNoSource is search's error when the Injector has no Source.
var errNoSource = errors.New("no source of experiences")

// search finds the experiences a query_hindsight call shows: at most
// MaxExperiences usable ones, best first, about tool on server when any
// are (else about anything on server; "" means every server).
func (in *Injector) search(ctx context.Context, server, situation, tool, taskType string) ([]hindsight.ScoredExperience, error) {
	if in.Source == nil {
		return nil, errNoSource
	}
	ctx, cancel := context.WithTimeout(ctx, defaults.Positive(in.QueryTimeout, DefaultQueryTimeout))
	defer cancel()
	max := defaults.Positive(in.MaxExperiences, DefaultMaxExperiences)
	q := hindsight.Query{
		// An agent often pastes the error it got: its template is a signal.
		ErrorTemplate: errtemplate.Mask(situation),
		Text:          strings.TrimSpace(strings.Join([]string{situation, tool, taskType}, " ")),
		Namespace:     in.namespace(),
		Server:        server,
		Tool:          tool,
		K:             max,
		NoHit:         true,
	}
	found, err := in.Source.Search(ctx, q)
	if err == nil && len(found) == 0 && tool != "" {
		q.Tool = "" // nothing about this tool: anything on this server
		found, err = in.Source.Search(ctx, q)
	}
	if err != nil {
		return nil, err
	}
	found = usable(found)
	if len(found) > max {
		found = found[:max]
	}
	return found, nil
}

// queryBlocks formats found for a query_hindsight answer.
func (in *Injector) queryBlocks(found []hindsight.ScoredExperience) []block {
	perLesson := defaults.Positive(in.MaxTokensPerLesson, DefaultMaxTokensPerLesson)
	blocks := make([]block, len(found))
	for i := range found {
		blocks[i] = experienceBlock(i+1, &found[i], perLesson)
	}
	return blocks
}

// Query answers a query_hindsight call outside a sidecar's session (the
// memory's own MCP server, `hindsight mcp`): the same text as the
// sidecar's tool — at most MaxExperiences experiences of at most
// MaxTokensPerLesson tokens each, most relevant first, or
// NoExperienceText — without a session budget. It returns the text and
// the experiences it shows. server "" searches every server. A failed
// search is an error (and the text UnavailableText, or StoreUnavailableText
// when the store is unreachable).
func (in *Injector) Query(ctx context.Context, server, situation, tool, taskType string) (string, []hindsight.ScoredExperience, error) {
	situation, tool, taskType = strings.TrimSpace(situation), strings.TrimSpace(tool), strings.TrimSpace(taskType)
	if situation == "" && tool == "" {
		return Marker + " Describe the situation (argument \"situation\") to get past experience.", nil, nil
	}
	found, err := in.search(ctx, server, situation, tool, taskType)
	if errors.Is(err, hindsight.ErrStoreUnavailable) {
		return StoreUnavailableText, nil, err
	}
	if err != nil {
		return UnavailableText, nil, err
	}
	if len(found) == 0 {
		return NoExperienceText, nil, nil
	}
	blocks := in.queryBlocks(found)
	limit := len(blocks)*(defaults.Positive(in.MaxTokensPerLesson, DefaultMaxTokensPerLesson)+8) + CountTokens(queryHeader)
	text, ids, _ := assemble(queryHeader, blocks, "\n\n", "", limit)
	shown := found[:0:0]
	for _, e := range found {
		for _, id := range ids {
			if e.ID == id {
				shown = append(shown, e)
				break
			}
		}
	}
	return text, shown, nil
}
