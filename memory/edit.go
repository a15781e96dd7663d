package memory

import (
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/guard"
)

// EditRequest is a person's new text for a lesson (an Op of kind OpEdit;
// the body of the daemon's POST /v1/experiences/{id}/edit). Version must
// be the version the person read (else hindsight.ErrConflict); nil fields
// keep their value. The edited experience is stored as its next version,
// with origin EditOrigin; the store keeps only the current version.
type EditRequest struct {
	Namespace  string   `json:"namespace,omitempty"`
	Version    int      `json:"version"`
	Situation  *string  `json:"situation,omitempty"`
	Action     *string  `json:"action,omitempty"`
	Result     *string  `json:"result,omitempty"`
	Lesson     *string  `json:"lesson,omitempty"`
	Confidence *float64 `json:"confidence,omitempty"`
}

// EditOrigin is the origin of an experience a person edited.
const EditOrigin = "manual"

// validateEdit refuses what no stored version could take: an empty lesson,
// a confidence outside [0, 1], a text that fails guard.Check (a person's
// edit is validated as a model's answer is). It removes control and
// invisible characters from the texts.
func validateEdit(req *EditRequest) error {
	if req.Lesson != nil && strings.TrimSpace(*req.Lesson) == "" {
		return badRequest("an experience needs a lesson")
	}
	if c := req.Confidence; c != nil && (*c < 0 || *c > 1) {
		return badRequest("confidence %v: not between 0 and 1", *c)
	}
	for _, f := range []*string{req.Lesson, req.Situation, req.Action, req.Result} {
		if f == nil {
			continue
		}
		*f = guard.Printable(*f)
		g := guard.Check(*f)
		if f == req.Lesson {
			g = guard.CheckLesson(*f)
		}
		if g != nil {
			return badRequest("refused (%s): %q", g.Reason, g.Match)
		}
	}
	return nil
}

// applyEdit sets the fields req gives on e, marks it a person's and drops
// its vector (the text changed: it is embedded again).
func applyEdit(e *hindsight.Experience, req *EditRequest) error {
	if err := validateEdit(req); err != nil {
		return err
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	set(&e.Situation, req.Situation)
	set(&e.Action, req.Action)
	set(&e.Result, req.Result)
	set(&e.Lesson, req.Lesson)
	if strings.TrimSpace(e.Lesson) == "" {
		return badRequest("an experience needs a lesson")
	}
	if c := req.Confidence; c != nil {
		e.Confidence = *c
	}
	e.Origin = EditOrigin
	e.Vector, e.Embedder = nil, ""
	return nil
}
