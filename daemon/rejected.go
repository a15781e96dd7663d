package daemon

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// Rejection is a lesson that reflection refused to store, with why: what
// `hindsight experiences rejected` lists, so an operator sees what tool
// output or a model tried to teach and was kept from the agents.
type Rejection struct {
	TaskID string    `json:"task_id"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"` // a reflect.Drop… reason, or QuarantineReason and guard's
	Detail string    `json:"detail"` // redacted
	Server string    `json:"server,omitempty"`
	Tool   string    `json:"tool,omitempty"`
	Origin string    `json:"origin,omitempty"`
	Lesson string    `json:"lesson"` // redacted, cut to 200 bytes
}

// RejectionLister is implemented by a ReflectionQueue that keeps the
// lessons it refused.
type RejectionLister interface {
	Rejected(ctx context.Context, limit int) ([]Rejection, error)
}

// handleRejected is GET /v1/experiences/rejected?limit=N: the latest
// refused lessons, newest first, with the quarantined ones (reason
// "quarantined: …", the experience's id in place of a task's).
func (s *Server) handleRejected(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = 100
	}
	list := s.quar.list()
	if rl, ok := s.Queue.(RejectionLister); ok {
		refused, err := rl.Rejected(r.Context(), limit)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		list = append(list, refused...)
		sort.SliceStable(list, func(i, j int) bool { return list[i].At.After(list[j].At) })
	}
	if len(list) > limit {
		list = list[:limit]
	}
	writeJSON(w, http.StatusOK, list)
}

// Rejected lists the latest lessons reflection refused, newest first.
func (c *Client) Rejected(ctx context.Context, limit int) ([]Rejection, error) {
	var list []Rejection
	q := make(map[string][]string)
	if limit > 0 {
		q["limit"] = []string{strconv.Itoa(limit)}
	}
	err := c.call(ctx, http.MethodGet, "/experiences/rejected", q, nil, &list)
	return list, err
}
