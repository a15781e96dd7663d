package capture

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// A builder redacts exchanges and builds their steps, on as many workers
// as it is started with.
type builder struct {
	red       *Redactor
	maxBody   int    // Options.MaxBodyBytes
	namespace string // Options.Namespace
	log       *slog.Logger
}

// start runs n workers on the chunks from q and hands their steps to m;
// once q's work is closed and the workers are done, it tells m how many
// exchanges were queued in all.
func (b *builder) start(n int, q *intake, m *committer) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.work(q.work, m)
		}()
	}
	go func() {
		wg.Wait()
		m.finish(q.arrivals())
	}()
}

// work builds the steps of each chunk it is handed, then passes them to
// the committer together.
func (b *builder) work(work <-chan []queued, m *committer) {
	var steps []*hindsight.Step
	for chunk := range work {
		// One allocation for the chunk's steps: the committer copies
		// them out in order, and the block goes with the last of them.
		block := make([]hindsight.Step, len(chunk))
		steps = steps[:0]
		for i, q := range chunk {
			steps = append(steps, b.build(q.ex, &block[i]))
		}
		m.put(chunk, steps)
		clear(steps)
	}
}

// build redacts and builds one step into s and returns it; a panic loses
// only that step (build returns nil).
func (b *builder) build(ex *proxy.Exchange, s *hindsight.Step) (built *hindsight.Step) {
	defer func() {
		if p := recover(); p != nil {
			b.log.Error("building a step panicked; step not recorded", "method", ex.Method, "panic", fmt.Sprint(p))
			built = nil
		}
	}()
	*s = BuildStep(ex, b.red, b.maxBody)
	s.Namespace = b.namespace
	return s
}
