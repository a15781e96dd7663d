package capture

import (
	"fmt"
	"log/slog"
	"sync"
	"unsafe"

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
		// The chunk's steps are built into blocks of stepBlock: the
		// committer copies them out in order, and a block goes with the
		// last of its steps.
		var block []hindsight.Step
		steps = steps[:0]
		for i, q := range chunk {
			if len(block) == 0 {
				block = make([]hindsight.Step, min(stepBlock, len(chunk)-i))
			}
			steps = append(steps, b.build(q.ex, &block[0]))
			block = block[1:]
		}
		m.put(chunk, steps)
		clear(steps)
	}
}

// stepBlock is at most how many steps a worker allocates at once: as many
// as fit in 16 KiB, a small allocation (a large one is slower to get and
// clear).
const stepBlock = 16 << 10 / int(unsafe.Sizeof(hindsight.Step{}))

// build redacts and builds one step into s and returns it; a panic loses
// only that step (build returns nil).
func (b *builder) build(ex *proxy.Exchange, s *hindsight.Step) (built *hindsight.Step) {
	defer func() {
		if p := recover(); p != nil {
			b.log.Error("building a step panicked; step not recorded", "method", ex.Method, "panic", fmt.Sprint(p))
			built = nil
		}
	}()
	buildStep(s, ex, b.red, b.maxBody)
	s.Namespace = b.namespace
	return s
}
