package memory

import (
	"context"
	"sort"
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

// RejectionLister lists the lessons reflection refused, newest first: the
// daemon's reflection queue implements it when it keeps them.
type RejectionLister interface {
	Rejected(ctx context.Context, limit int) ([]Rejection, error)
}

// Rejected returns the latest refused lessons, at most limit (0: 100),
// newest first: the quarantined ones (reason "quarantined: …", the
// experience's id in place of a task's) with those Rejections lists.
func (s *Service) Rejected(ctx context.Context, limit int) ([]Rejection, error) {
	s.init()
	if limit <= 0 {
		limit = 100
	}
	list := s.quar.list()
	if s.Rejections != nil {
		refused, err := s.Rejections.Rejected(ctx, limit)
		if err != nil {
			return nil, err
		}
		list = append(list, refused...)
		sort.SliceStable(list, func(i, j int) bool { return list[i].At.After(list[j].At) })
	}
	if len(list) > limit {
		list = list[:limit]
	}
	return list, nil
}
