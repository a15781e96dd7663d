package daemon

import (
	"context"
	"fmt"
	"net/http"
)

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
