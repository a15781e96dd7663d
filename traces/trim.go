package traces

import (
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"time"
)

// trimQuiet is how long the trace store waits after its last read or
// write before it gives memory back; trimBusy how long at most while it
// is read or written without such a pause (a burst of ingest, a backlog of
// reflection).
const (
	trimQuiet = 3 * time.Second
	trimBusy  = 30 * time.Second
)

// trimmer gives memory back to the system once the trace store has been
// quiet for trimQuiet after work, or trimBusy after the work began: the
// Go heap's free pages (debug.FreeOSMemory), and the pages of the store's
// files that Badger maps into the daemon (trimMapped). Badger writes and reads its value
// log through memory maps, so without it every step written or read
// would stay resident: 150k steps made the daemon's RSS 290 MB, of which
// 250 MB were pages of its files. It sleeps while nothing happens.
type trimmer struct {
	dir    string
	logger *slog.Logger
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

func startTrimmer(dir string, logger *slog.Logger) *trimmer {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // as /proc/self/maps names files
	}
	t := &trimmer{dir: dir, logger: logger, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go t.loop()
	return t
}

// touched says the store was read or written.
func (t *trimmer) touched() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *trimmer) loop() {
	defer close(t.done)
	timer := time.NewTimer(trimQuiet)
	timer.Stop()
	var busySince time.Time // zero: no work since the last trim
	for {
		select {
		case <-t.stop:
			timer.Stop()
			return
		case <-t.kick:
			if busySince.IsZero() {
				busySince = time.Now()
			}
			// Quiet counts from the latest touch, up to trimBusy.
			timer.Reset(min(trimQuiet, max(0, trimBusy-time.Since(busySince))))
		case <-timer.C:
			busySince = time.Time{}
			debug.FreeOSMemory()
			t.pageOut()
		}
	}
}

// pageOut pages out the store's mapped files now (trimMapped).
func (t *trimmer) pageOut() {
	if err := trimMapped(t.dir); err != nil {
		t.logger.Debug("give back mapped pages", "dir", t.dir, "err", err)
	}
}

func (t *trimmer) close() {
	close(t.stop)
	<-t.done
}
