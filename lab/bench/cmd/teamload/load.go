//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
)

// Operations of the mix.
const (
	opSearch1 = "search k=1"
	opSearch3 = "search k=3"
	opReflect = "reflection"
	opEdit    = "edit"
	opPin     = "pin"
	opSame    = "same-moment reflection"
)

// Outcomes of an operation.
const (
	okAnswered  = "ok"
	okQueued    = "queued"      // a write the daemon queued (store unreachable); applied later
	unavailable = "unavailable" // a search answered "store unavailable" (query_hindsight says so)
	deferred    = "deferred"    // a reflection the store could not take yet; kept and tried again
	conflict    = "conflict"    // an edit of a version another writer had replaced (409)
	failed      = "failed"      // an error surfaced to the caller
)

// Phases of the run, for the errors around the node kill.
const (
	phaseBefore = "before the kill"
	phaseDown   = "node down"
	phaseAfter  = "after the restart"
)

// mix is the share of each operation, in percent.
type mix struct{ search1, search3, reflect, edit, pin int }

func (m mix) pick(r *rand.Rand) string {
	n := r.IntN(m.search1 + m.search3 + m.reflect + m.edit + m.pin)
	for _, c := range []struct {
		op string
		w  int
	}{{opSearch1, m.search1}, {opSearch3, m.search3}, {opReflect, m.reflect}, {opEdit, m.edit}, {opPin, m.pin}} {
		if n < c.w {
			return c.op
		}
		n -= c.w
	}
	return opSearch1
}

// record is what the run observed.
type record struct {
	mu       sync.Mutex
	phase    string
	lat      map[string]map[string][]time.Duration // phase → op → answered operations' latencies
	outcomes map[string]map[string]int             // phase → op/outcome → count
	errs     []string                              // the first surfaced errors
	hits     map[hitRef]int                        // hits the counted searches returned
	edits    map[hitRef]int                        // edits and pins acknowledged (answered or queued)
	learnt   []learnt                              // lessons reflections added or reinforced
	pending  []pendingReflection                   // reflections deferred, to try again
	same     []sameMoment                          // lessons learnt by several daemons at once
}

type hitRef struct{ ns, id string }

type learnt struct{ ns, id string }

type pendingReflection struct {
	m *member
	e hindsight.Experience
}

type sameMoment struct {
	ns, tool, lesson, phase string
}

func newRecord() *record {
	return &record{phase: phaseBefore, lat: map[string]map[string][]time.Duration{}, outcomes: map[string]map[string]int{},
		hits: map[hitRef]int{}, edits: map[hitRef]int{}}
}

func (r *record) setPhase(p string) {
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
}

func (r *record) note(op, outcome string, d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outcomes[r.phase] == nil {
		r.outcomes[r.phase] = map[string]int{}
	}
	r.outcomes[r.phase][op+"/"+outcome]++
	if outcome == okAnswered {
		if r.lat[r.phase] == nil {
			r.lat[r.phase] = map[string][]time.Duration{}
		}
		r.lat[r.phase][op] = append(r.lat[r.phase][op], d)
	}
	if outcome == failed && len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf("%s (%s): %v", op, r.phase, err))
	}
}

// load is one run's load on the fleet.
type load struct {
	members []*member
	corpus  int // lessons bulk-loaded, L0000000 …
	spaces  int
	seed    uint64
	mix     mix
	think   time.Duration
	rec     *record
	emb     hindsight.Embedder
	start   time.Time
}

// run drives member m until ctx ends: an operation of the mix, then a
// pause of about think (exponentially distributed).
func (l *load) run(ctx context.Context, m *member) {
	r := rand.New(rand.NewPCG(l.seed, uint64(m.id)+1))
	for n := 0; ctx.Err() == nil; n++ {
		pause := time.Duration(r.ExpFloat64() * float64(l.think))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		switch op := l.mix.pick(r); op {
		case opSearch1, opSearch3:
			l.search(ctx, m, r, op)
		case opReflect:
			l.reflect(ctx, m, r, n)
		case opEdit, opPin:
			l.edit(ctx, m, r, op)
		}
	}
}

// target picks a stored lesson, the popular ones (low ids) more often.
func (l *load) target(r *rand.Rand) *hindsight.Experience {
	i := int(float64(l.corpus) * r.Float64() * r.Float64())
	return lesson(i, l.spaces, l.seed, l.start)
}

// search asks the daemon as a sidecar's query_hindsight does (counted).
func (l *load) search(ctx context.Context, m *member, r *rand.Rand, op string) {
	e := l.target(r)
	k := 1
	if op == opSearch3 {
		k = 3
	}
	t0 := time.Now()
	res, err := m.client.Search(ctx, hindsight.Query{Namespace: e.Namespace, Text: situationText(e), Tool: e.Tool, K: k})
	d := time.Since(t0)
	switch {
	case ctx.Err() != nil:
		return
	case err != nil && isUnavailable(err):
		l.rec.note(op, unavailable, d, err)
		return
	case err != nil:
		l.rec.note(op, failed, d, err)
		return
	}
	l.rec.note(op, okAnswered, d, nil)
	l.rec.mu.Lock()
	for _, x := range res {
		l.rec.hits[hitRef{e.Namespace, x.ID}]++
	}
	l.rec.mu.Unlock()
}

// edit changes a stored lesson's text (or pins or unpins it) through the
// daemon, as a person does in the web UI: read, then edit that version.
func (l *load) edit(ctx context.Context, m *member, r *rand.Rand, op string) {
	e := l.target(r)
	t0 := time.Now()
	cur, err := m.client.Experience(ctx, e.Namespace, e.ID)
	if err == nil {
		if op == opPin {
			_, err = m.client.Pin(ctx, e.Namespace, e.ID, !cur.Pinned)
		} else {
			text := fmt.Sprintf("%s Reviewed by daemon %d.", e.Lesson, m.id)
			_, err = m.client.Edit(ctx, e.ID, daemon.EditRequest{Namespace: e.Namespace, Version: cur.Version, Lesson: &text})
		}
	}
	d := time.Since(t0)
	queued := err != nil && strings.HasPrefix(err.Error(), "queued:")
	switch {
	case ctx.Err() != nil:
		return
	case queued:
		// The daemon's 202: the write waits in its store-op queue (the
		// client reports it as an error carrying that message).
	case err != nil && isUnavailable(err):
		// The read found the store unreachable: the person sees that
		// and edits nothing (a write itself is queued, never refused).
		l.rec.note(op, unavailable, d, err)
		return
	case err != nil && strings.Contains(err.Error(), "version"):
		l.rec.note(op, conflict, d, err)
		return
	case err != nil:
		l.rec.note(op, failed, d, err)
		return
	}
	outcome := okAnswered
	if queued {
		outcome = okQueued
	}
	l.rec.note(op, outcome, d, nil)
	l.rec.mu.Lock()
	l.rec.edits[hitRef{e.Namespace, e.ID}]++
	l.rec.mu.Unlock()
}

// newLesson is the n-th lesson member m reflects from a task of its own.
func (l *load) newLesson(m *member, r *rand.Rand, n int) hindsight.Experience {
	e := *lesson(l.corpus+m.id*1_000_000+n, l.spaces, l.seed^0x5eed, l.start)
	e.ID, e.Version, e.CreatedAt, e.UpdatedAt, e.Origin = "", 0, time.Time{}, time.Time{}, "rules"
	e.SourceTask = fmt.Sprintf("task-d%02d-%d", m.id, n)
	e.Lesson = fmt.Sprintf("%s Seen in %s.", e.Lesson, variant(r))
	return e
}

// reflect stores a lesson member m learnt (and, first, any it could not
// store before: reflection keeps such a task pending).
func (l *load) reflect(ctx context.Context, m *member, r *rand.Rand, n int) {
	e := l.newLesson(m, r, n)
	l.rec.mu.Lock()
	var retry []hindsight.Experience
	keep := l.rec.pending[:0]
	for _, p := range l.rec.pending {
		if p.m == m {
			retry = append(retry, p.e)
		} else {
			keep = append(keep, p)
		}
	}
	l.rec.pending = keep
	l.rec.mu.Unlock()
	for _, x := range append(retry, e) {
		l.learn(ctx, m, x, opReflect)
	}
}

// learn merges e as member m's reflection does and notes the outcome.
func (l *load) learn(ctx context.Context, m *member, e hindsight.Experience, op string) {
	t0 := time.Now()
	res, err := m.merger(e.Namespace, l.emb).Merge(ctx, time.Now(), []hindsight.Experience{e})
	d := time.Since(t0)
	switch {
	case ctx.Err() != nil && err != nil:
		l.rec.mu.Lock()
		l.rec.pending = append(l.rec.pending, pendingReflection{m, e})
		l.rec.mu.Unlock()
		return
	case err != nil && isUnavailable(err):
		l.rec.note(op, deferred, d, err)
		l.rec.mu.Lock()
		l.rec.pending = append(l.rec.pending, pendingReflection{m, e})
		l.rec.mu.Unlock()
		return
	case err != nil:
		l.rec.note(op, failed, d, err)
		return
	}
	l.rec.note(op, okAnswered, d, nil)
	l.rec.mu.Lock()
	for _, x := range res {
		if x.ID != "" {
			l.rec.learnt = append(l.rec.learnt, learnt{e.Namespace, x.ID})
		}
	}
	l.rec.mu.Unlock()
}

// sameMoment makes group members learn one lesson at the same moment, as
// daemons whose agents met the same failure do.
func (l *load) sameMoment(ctx context.Context, r *rand.Rand, group, n int) {
	if group > len(l.members) {
		group = len(l.members)
	}
	picked := slices.Clone(l.members)
	r.Shuffle(len(picked), func(i, j int) { picked[i], picked[j] = picked[j], picked[i] })
	picked = picked[:group]
	e := l.newLesson(picked[0], r, 500_000+n)
	e.Lesson = fmt.Sprintf("Before calling %s on the %s pipeline, wait until %s reports the %s quota renewed; "+
		"an answer of %s means it is spent.", e.Tool, variant(r), e.Server, variant(r), e.ErrorCode)
	l.rec.mu.Lock()
	l.rec.same = append(l.rec.same, sameMoment{e.Namespace, e.Tool, e.Lesson, l.rec.phase})
	l.rec.mu.Unlock()
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, m := range picked {
		x := e
		x.SourceTask = fmt.Sprintf("task-same-%d-%d", n, i)
		wg.Go(func() {
			<-gate
			l.learn(ctx, m, x, opSame)
		})
	}
	close(gate)
	wg.Wait()
}

// retryPending stores the reflections deferred while a node was down,
// each daemon's in order, the daemons at once, until ctx ends; it
// returns how many are still deferred.
func (l *load) retryPending(ctx context.Context) int {
	l.rec.mu.Lock()
	byMember := map[*member][]hindsight.Experience{}
	for _, p := range l.rec.pending {
		byMember[p.m] = append(byMember[p.m], p.e)
	}
	l.rec.pending = nil
	l.rec.mu.Unlock()
	var wg sync.WaitGroup
	for m, es := range byMember {
		wg.Go(func() {
			for i, e := range es {
				if ctx.Err() != nil {
					l.rec.mu.Lock()
					for _, x := range es[i:] {
						l.rec.pending = append(l.rec.pending, pendingReflection{m, x})
					}
					l.rec.mu.Unlock()
					return
				}
				l.learn(ctx, m, e, opReflect)
			}
		})
	}
	wg.Wait()
	l.rec.mu.Lock()
	defer l.rec.mu.Unlock()
	return len(l.rec.pending)
}

// isUnavailable reports whether err says the experience store could not
// be reached (the daemon's 503, the store's ErrStoreUnavailable).
func isUnavailable(err error) bool {
	return errors.Is(err, hindsight.ErrStoreUnavailable) || strings.Contains(err.Error(), "unavailable")
}
