package inject

import (
	"context"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/defaults"
)

// lessonsCache is the last search for each server's top lessons, and
// those under way.
type lessonsCache struct {
	mu sync.Mutex
	m  map[string]*lessonsFetch // by server
}

// lessonsFetch is one search for a server's top lessons.
type lessonsFetch struct {
	done    chan struct{} // closed when the search ended
	at      time.Time
	list    []hindsight.ScoredExperience
	err     error
	refresh bool // a refresh is under way
}

// Prefetch searches the top lessons of in.Server now, so the first
// initialize does not wait for the daemon. Run it on a goroutine when the
// sidecar starts.
func (in *Injector) Prefetch(ctx context.Context) {
	if in.NoInstructions || in.Source == nil {
		return
	}
	in.lessonsFor(ctx, in.Server)
}

// lessonsFor returns the top lessons for server: fresh ones from the cache,
// or those of a search it starts or joins, waiting at most until ctx ends;
// then stale ones, if any.
func (in *Injector) lessonsFor(ctx context.Context, server string) ([]hindsight.ScoredExperience, error) {
	ttl := defaults.Positive(in.LessonsTTL, DefaultLessonsTTL)
	in.lessons.mu.Lock()
	if in.lessons.m == nil {
		in.lessons.m = make(map[string]*lessonsFetch)
	}
	f := in.lessons.m[server]
	switch {
	case f == nil:
		f = &lessonsFetch{done: make(chan struct{})}
		in.lessons.m[server] = f
		go in.fetchLessons(server, f, nil)
	case isDone(f.done) && !f.refresh && (time.Since(f.at) > ttl || (f.err != nil && time.Since(f.at) > retryFailed)):
		// Stale: refresh in the background and wait for it like a first
		// fetch, falling back to what we had.
		f.refresh = true
		nf := &lessonsFetch{done: make(chan struct{})}
		go in.fetchLessons(server, nf, f)
		f = nf
	}
	in.lessons.mu.Unlock()
	select {
	case <-f.done:
		return f.list, f.err
	case <-ctx.Done():
		in.lessons.mu.Lock()
		old := in.lessons.m[server]
		in.lessons.mu.Unlock()
		if old != nil && old != f && isDone(old.done) {
			return old.list, old.err
		}
		return nil, ctx.Err()
	}
}

// fetchLessons runs one search for server's top lessons into f, and makes f
// the cached fetch when it succeeded (or when there was none before).
func (in *Injector) fetchLessons(server string, f, prev *lessonsFetch) {
	ctx, cancel := context.WithTimeout(context.Background(), defaults.Positive(in.QueryTimeout, DefaultQueryTimeout))
	defer cancel()
	n := defaults.Positive(in.MaxInstructionLessons, DefaultMaxInstructionLessons)
	list, err := in.Source.Search(ctx, hindsight.Query{
		Text:      "", // no text: the store's best by confidence, evidence, hits and age
		Namespace: in.namespace(),
		Server:    server,
		K:         2 * n,
		NoHit:     true,
		// Pinned lessons first, whatever their rank (see
		// instructionsBlock).
		IncludePinned: true,
	})
	kept := list[:0:0]
	for _, e := range list {
		if passes(&e.Experience) && !e.Unconfirmed() {
			kept = append(kept, e)
		}
	}
	f.list, f.err, f.at = kept, err, time.Now()
	if err != nil {
		in.logger().Warn("prefetch lessons", "server", server, "err", err)
	}
	close(f.done)
	in.lessons.mu.Lock()
	if prev != nil {
		prev.refresh = false
	}
	if err == nil || prev == nil {
		in.lessons.m[server] = f
	}
	in.lessons.mu.Unlock()
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
