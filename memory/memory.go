// Package memory is Hindsight's experience management: what the daemon
// does with a hindsight.ExperienceStore, without the HTTP that serves it
// (package daemon serves a Service on its socket).
//
// A Service lists, searches and reads experiences, adding the hits that
// wait in memory and withholding (quarantining) stored lessons whose text
// fails guard.CheckLesson; it writes them (forget, restore, pin, edit,
// purge), through a durable queue (Ops) while the store is unreachable; it
// imports packs, which are untrusted (CleanImport); and it counts the hits
// searches make, writing them in the background (Run) and at Close.
//
// Its exported fields configure it; set them before the first call. Its
// errors wrap ErrUnavailable (no store, no redactor: a part that is not
// configured), ErrInvalid (bad input), hindsight.ErrNotFound,
// hindsight.ErrConflict or hindsight.ErrStoreUnavailable.
package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/defaults"
	"github.com/hindsight-proxy/hindsight/traces"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrUnavailable reports a part of the service that is not configured: no
// experience store, no redactor, a store that cannot purge.
var ErrUnavailable = errors.New("not available")

// ErrInvalid marks bad input: a request no store could take. It is the
// trace store's ErrBadRequest, so that one test tells bad input apart
// whichever package refused it.
var ErrInvalid = traces.ErrBadRequest

func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Redactor removes secrets from what is stored on someone else's word
// (imported experiences, and the daemon's episodes). capture.Redactor
// implements it.
type Redactor interface {
	Redact(data []byte) ([]byte, int)
	RedactString(s string) (string, int)
}

// Service manages the experiences of one store. The zero value with Store
// set works: hits are counted in memory only and writes fail while the
// store is unreachable.
type Service struct {
	Store     hindsight.ExperienceStore // nil: every call fails with ErrUnavailable
	StoreName string                    // "embedded" or "weaviate", for errors and Stats
	Namespace string                    // default namespace; "": hindsight.DefaultNamespace
	// Redactor cleans imported experiences; nil: imports fail with
	// ErrUnavailable.
	Redactor Redactor
	Logger   *slog.Logger // nil: slog.Default()
	// Ops, when set, keeps the writes made while the store is unreachable
	// and applies them, in order, once it is back (its Apply is set to the
	// service's when nil); Run runs it. nil: such writes fail.
	Ops *Ops
	// Traces, when set, keeps the count of hits waiting in memory, so
	// that the hits of a process that died are counted lost at the next
	// start (see Recovered).
	Traces *traces.Store
	// QuarantinePath keeps the quarantined lessons across restarts (the
	// daemon's is QuarantineFile in its home); "": they are kept as long
	// as the service.
	QuarantinePath string
	// HitFlush is how often Run writes the hits searches count; 0:
	// DefaultHitFlush.
	HitFlush time.Duration
	// Rejections, when set, lists the lessons reflection refused, which
	// Rejected adds to the quarantined ones.
	Rejections RejectionLister

	once sync.Once
	hits *hitQueue
	quar *quarantine
	lost int
}

func (s *Service) init() {
	s.once.Do(func() {
		if s.Logger == nil {
			s.Logger = slog.Default()
		}
		s.quar = newQuarantine(s.QuarantinePath, s.Logger)
		var db *badger.DB
		if s.Traces != nil {
			db = s.Traces.DB()
		}
		s.hits = newHitQueue(db)
		if s.lost = s.hits.recover(); s.lost > 0 {
			s.Logger.Warn("hits of searches lost: the daemon stopped before writing them", "lost", s.lost)
		}
		if s.Ops != nil && s.Ops.Apply == nil {
			s.Ops.Apply = s.Apply
		}
	})
}

// Apply performs op against the store now, whatever waits in Ops (what
// Ops.Apply is set to when nil). A queued op (Seq set) edits the version
// stored then.
func (s *Service) Apply(ctx context.Context, op *Op) error {
	_, err := s.apply(ctx, op)
	return err
}

// Recovered returns how many hits a process that died left unwritten (see
// Service.Traces), counted lost when the service started.
func (s *Service) Recovered() int {
	s.init()
	return s.lost
}

// Resolve returns the namespace a request means: ns, else the service's
// default.
func (s *Service) Resolve(ns string) string {
	switch {
	case ns != "":
		return ns
	case s.Namespace != "":
		return s.Namespace
	}
	return hindsight.DefaultNamespace
}

// Check returns nil when the service has a store, else the error (wrapping
// ErrUnavailable) every call would return.
func (s *Service) Check() error {
	_, err := s.store()
	return err
}

func (s *Service) store() (hindsight.ExperienceStore, error) {
	s.init()
	if s.Store == nil {
		return nil, fmt.Errorf("experiences: %w: the daemon has no experience store open (see its log)", ErrUnavailable)
	}
	return s.Store, nil
}

// Collectors returns the service's metrics: hits queued, flushed and lost,
// lessons quarantined.
func (s *Service) Collectors() []prometheus.Collector {
	s.init()
	return append(s.hits.collectors(), s.quar.counter)
}

// Run writes the hits searches count every HitFlush and applies the
// queued writes (Ops) until ctx ends.
func (s *Service) Run(ctx context.Context) {
	s.init()
	var wg sync.WaitGroup
	if s.Ops != nil {
		wg.Go(func() { s.Ops.Run(ctx) })
	}
	t := time.NewTicker(defaults.Positive(s.HitFlush, DefaultHitFlush))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			s.FlushHits(ctx)
		}
	}
}

// Close writes the hits that wait and applies what Ops holds, as far as
// the store lets it before ctx ends; what it cannot apply stays queued
// for the next start.
func (s *Service) Close(ctx context.Context) {
	s.FlushHits(ctx)
	if s.Ops != nil && s.Ops.Depth() > 0 {
		if e := s.Ops.Drain(ctx); e != nil {
			s.Logger.Warn("store writes stay queued for the next start", "queued", s.Ops.Depth(), "err", e)
		}
	}
}

// StoreStats describes the experience store.
type StoreStats struct {
	Backend    string `json:"backend"`
	Available  bool   `json:"available"` // false: no store open, or it is unreachable
	Total      int    `json:"total"`
	Active     int    `json:"active"`
	Deleted    int    `json:"deleted"`
	Superseded int    `json:"superseded"`
	Error      string `json:"error,omitempty"`
}

// counter is a store that counts its experiences without reading them
// (store/embedded, from its index): Count's total holds the deleted and
// the superseded (not deleted) ones.
type counter interface {
	Count() (total, deleted, superseded int)
}

// storeStatsTimeout bounds the count of experiences in Stats by a list.
const storeStatsTimeout = 3 * time.Second

// Stats counts the store's experiences, within a few seconds (an
// unreachable store would otherwise hold the caller for its whole retry).
func (s *Service) Stats(ctx context.Context) *StoreStats {
	ss := &StoreStats{Backend: s.StoreName}
	if s.Store == nil {
		ss.Error = "no experience store is open"
		return ss
	}
	ss.Available = true
	if c, ok := s.Store.(counter); ok {
		ss.Total, ss.Deleted, ss.Superseded = c.Count()
		ss.Active = ss.Total - ss.Deleted - ss.Superseded
		return ss
	}
	ctx, cancel := context.WithTimeout(ctx, storeStatsTimeout)
	defer cancel()
	all, err := s.Store.List(ctx, hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true})
	if err != nil {
		ss.Available = !errors.Is(err, hindsight.ErrStoreUnavailable)
		ss.Error = err.Error()
		return ss
	}
	for i := range all {
		ss.Total++
		switch {
		case all[i].Deleted:
			ss.Deleted++
		case all[i].SupersededBy != "":
			ss.Superseded++
		default:
			ss.Active++
		}
	}
	return ss
}
