package store

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// Pending stands for an experience store that is still being opened (its
// service is down at start): until Set gives it the open store, every call
// fails with an error wrapping hindsight.ErrStoreUnavailable, as an open
// store's would during an outage; after Set, calls go to that store.
type Pending struct {
	emb   hindsight.Embedder
	ready chan struct{} // closed by Set

	mu     sync.RWMutex
	st     hindsight.ExperienceStore
	why    error // the last failure to open
	closed bool
}

var _ hindsight.ExperienceStore = (*Pending)(nil)
var _ Purger = (*Pending)(nil)

// NewPending returns a store not open yet whose vectors will come from emb.
func NewPending(emb hindsight.Embedder) *Pending {
	return &Pending{emb: emb, ready: make(chan struct{})}
}

// Set hands p the open store. It returns false when p was closed
// meanwhile: the caller closes st.
func (p *Pending) Set(st hindsight.ExperienceStore) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.st, p.why = st, nil
	close(p.ready)
	return true
}

// Ready is closed once Set has given p its store.
func (p *Pending) Ready() <-chan struct{} { return p.ready }

// Failed records why the store is not open yet, for the errors of calls.
func (p *Pending) Failed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.why = err
}

// Closed reports whether Close was called.
func (p *Pending) Closed() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.closed
}

// store returns the open store, or an error wrapping
// hindsight.ErrStoreUnavailable.
func (p *Pending) store() (hindsight.ExperienceStore, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.st != nil {
		return p.st, nil
	}
	if p.why != nil {
		return nil, fmt.Errorf("%w: not opened yet: %w", hindsight.ErrStoreUnavailable, p.why)
	}
	return nil, fmt.Errorf("%w: not opened yet", hindsight.ErrStoreUnavailable)
}

// Import imports through the store opened when it is an Importer, else
// puts each experience.
func (p *Pending) Import(ctx context.Context, exps []*hindsight.Experience) error {
	st, err := p.store()
	if err != nil {
		return err
	}
	if imp, ok := st.(Importer); ok {
		return imp.Import(ctx, exps)
	}
	for _, e := range exps {
		if err := st.Put(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// Describe describes nothing: the metrics of the store opened, when it
// has any, are unchecked.
func (p *Pending) Describe(chan<- *prometheus.Desc) {}

// Collect sends the metrics of the store once it is open, when it is a
// prometheus.Collector.
func (p *Pending) Collect(ch chan<- prometheus.Metric) {
	p.mu.RLock()
	st := p.st
	p.mu.RUnlock()
	if c, ok := st.(prometheus.Collector); ok {
		c.Collect(ch)
	}
}

// Embedder returns the embedder the store's vectors come from.
func (p *Pending) Embedder() hindsight.Embedder { return p.emb }

func (p *Pending) Put(ctx context.Context, e *hindsight.Experience) error {
	st, err := p.store()
	if err != nil {
		return err
	}
	return st.Put(ctx, e)
}

func (p *Pending) Get(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	st, err := p.store()
	if err != nil {
		return nil, err
	}
	return st.Get(ctx, namespace, id)
}

func (p *Pending) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	st, err := p.store()
	if err != nil {
		return nil, err
	}
	return st.Search(ctx, q)
}

func (p *Pending) List(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	st, err := p.store()
	if err != nil {
		return nil, err
	}
	return st.List(ctx, opt)
}

func (p *Pending) RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error {
	st, err := p.store()
	if err != nil {
		return err
	}
	return st.RecordHits(ctx, namespace, ids, at)
}

// Purge purges through the open store; one that cannot purge is an error.
func (p *Pending) Purge(ctx context.Context, namespace string, ids []string) (int, error) {
	st, err := p.store()
	if err != nil {
		return 0, err
	}
	pu, ok := st.(Purger)
	if !ok {
		return 0, errors.New("purge experiences: the store cannot purge")
	}
	return pu.Purge(ctx, namespace, ids)
}

// Close closes the open store, if any; a store Set after Close is refused.
func (p *Pending) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.st == nil {
		return nil
	}
	return p.st.Close()
}
