package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/hindsight-proxy/hindsight"
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
// EditOrigin. The store keeps only the current version.
func (s *Server) handleEdit(w http.ResponseWriter, r *http.Request) {
	var req EditRequest
	st, e, ok := s.decodeAndFind(w, r, &req, func() string { return req.Namespace })
	if !ok {
		return
	}
	if e.Version != req.Version {
		s.fail(w, r, fmt.Errorf("edit experience %s: read version %d, stored %d: %w", e.ID, req.Version, e.Version, hindsight.ErrConflict))
		return
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
		s.fail(w, r, badRequest("an experience needs a lesson"))
		return
	}
	if c := req.Confidence; c != nil {
		if *c < 0 || *c > 1 {
			s.fail(w, r, badRequest("confidence %v: not between 0 and 1", *c))
			return
		}
		e.Confidence = *c
	}
	e.Origin = EditOrigin
	e.Vector, e.Embedder = nil, "" // the text changed: embed it again
	if err := st.Put(r.Context(), e); err != nil {
		s.fail(w, r, fmt.Errorf("put experience: %w", err))
		return
	}
	s.Logger.Info("experience edited", "id", e.ID, "namespace", e.Namespace, "version", e.Version)
	writeJSON(w, http.StatusOK, e)
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

// decodeAndFind decodes the request body into req and reads the
// experience the path names, in the namespace req gives (namespace is
// read after decoding). On failure it has answered, and ok is false.
func (s *Server) decodeAndFind(w http.ResponseWriter, r *http.Request, req any, namespace func() string) (st hindsight.ExperienceStore, e *hindsight.Experience, ok bool) {
	st, err := s.store()
	if err == nil {
		err = decodeBody(w, r, req)
	}
	if err == nil {
		e, err = s.find(r.Context(), st, namespace(), r.PathValue("id"))
	}
	if err != nil {
		s.fail(w, r, err)
		return nil, nil, false
	}
	return st, e, true
}

// handlePin pins or unpins an experience (hindsight.Experience.Pinned).
func (s *Server) handlePin(w http.ResponseWriter, r *http.Request) {
	var req PinRequest
	st, e, ok := s.decodeAndFind(w, r, &req, func() string { return req.Namespace })
	if !ok {
		return
	}
	if e.Pinned != req.Pinned {
		e.Pinned = req.Pinned
		if err := st.Put(r.Context(), e); err != nil {
			s.fail(w, r, fmt.Errorf("put experience: %w", err))
			return
		}
		s.Logger.Info("experience changed", "id", e.ID, "namespace", e.Namespace, "pinned", e.Pinned)
	}
	writeJSON(w, http.StatusOK, e)
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
