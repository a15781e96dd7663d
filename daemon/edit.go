package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/guard"
)

// EditRequest is the body of POST /v1/experiences/{id}/edit: a person's
// new text for a lesson. Version must be the version the person read (else
// 409); nil fields keep their value.
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

// handleEdit stores the edited experience as its next version, with origin
// EditOrigin. The store keeps only the current version. An edit queued
// while the store is unreachable applies to the version stored then.
func (s *Server) handleEdit(w http.ResponseWriter, r *http.Request) {
	var req EditRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := validateEdit(&req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.storeWrite(w, r, StoreOp{Kind: OpEdit, Namespace: req.Namespace, IDs: []string{r.PathValue("id")}, Edit: &req})
}

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

// Edit stores a person's edit of an experience as its next version and
// returns it.
func (c *Client) Edit(ctx context.Context, id string, req EditRequest) (*hindsight.Experience, error) {
	var e hindsight.Experience
	if err := c.call(ctx, http.MethodPost, "/experiences/"+url.PathEscape(id)+"/edit", nil, req, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// PinRequest is the body of POST /v1/experiences/{id}/pin.
type PinRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Pinned    bool   `json:"pinned"`
}

// handlePin pins or unpins an experience (hindsight.Experience.Pinned).
func (s *Server) handlePin(w http.ResponseWriter, r *http.Request) {
	var req PinRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.storeWrite(w, r, StoreOp{Kind: OpPin, Namespace: req.Namespace, IDs: []string{r.PathValue("id")}, Pinned: req.Pinned})
}

// Pin pins (or unpins) an experience and returns it.
func (c *Client) Pin(ctx context.Context, namespace, id string, pinned bool) (*hindsight.Experience, error) {
	var e hindsight.Experience
	if err := c.call(ctx, http.MethodPost, "/experiences/"+url.PathEscape(id)+"/pin", nil, PinRequest{Namespace: namespace, Pinned: pinned}, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// UIInfo is the answer to POST /v1/ui: where the web UI listens, with the
// token of this start in URL.
type UIInfo struct {
	URL string `json:"url"`
}

func (s *Server) handleUI(w http.ResponseWriter, r *http.Request) {
	if s.UI == nil {
		s.fail(w, r, fmt.Errorf("web ui: %w: this daemon serves none", ErrUnavailable))
		return
	}
	u, err := s.UI(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("start web ui: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, UIInfo{URL: u})
}

// UI starts the daemon's web UI unless it runs, and returns its URL.
func (c *Client) UI(ctx context.Context) (string, error) {
	var info UIInfo
	if err := c.call(ctx, http.MethodPost, "/ui", nil, struct{}{}, &info); err != nil {
		return "", err
	}
	return info.URL, nil
}
