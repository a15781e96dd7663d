package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// A preparer creates mapped segments ahead of need, in a goroutine of its
// own: a new segment costs its zeros written and its mapping made (tens of
// µs, the copies of a hundred steps), which the relay would otherwise pay
// when a segment fills while the spares are used up (steps in flight
// faster than segments empty: the daemon behind, a burst). It is started
// the first time a segment fills while no spare is left, keeps
// segmentsAhead segments ready from then on (beside the spares), and is
// stopped by close, which removes what it left.
type preparer struct {
	dir   string
	want  chan struct{} // begin used the last spare
	ready chan jsegment // mapped, zeroed segments of mapSegmentSize
	quit  chan struct{}
	done  chan struct{}
}

// segmentsAhead is how many segments a preparer keeps ready: two, so that
// one is ready while the next is made. A variable so that benchmarks can
// measure the journal without (0).
var segmentsAhead = 2

// aheadNames numbers the segments made ahead, so that no name is made
// twice in a process (an outbox's directory is its process's alone).
var aheadNames atomic.Uint64

// prepareAhead asks for segments to be made ahead when the journal maps
// its segments, has full ones (steps in flight across segments) and no
// spare left. An idle sidecar's journal is one segment: it makes none.
// j.wmu is held (see journal).
func (j *journal) prepareAhead() {
	if len(j.spare) > 0 || len(j.old) == 0 || j.plain || !mapJournal || segmentsAhead == 0 {
		return
	}
	if j.ahead == nil {
		j.ahead = &preparer{dir: j.dir, want: make(chan struct{}, 1), ready: make(chan jsegment, segmentsAhead),
			quit: make(chan struct{}), done: make(chan struct{})}
		go j.ahead.run()
	}
	select {
	case j.ahead.want <- struct{}{}:
	default:
	}
}

// take returns a segment made ahead with room for need bytes, if one is
// ready.
func (p *preparer) take(need int) (jsegment, bool) {
	if p == nil || need > mapSegmentSize {
		return jsegment{}, false
	}
	select {
	case s := <-p.ready:
		return s, true
	default:
		return jsegment{}, false
	}
}

// run makes segments until segmentsAhead are ready each time it is asked.
// A segment it cannot make is left to begin, which makes its own and
// reports what fails.
func (p *preparer) run() {
	defer close(p.done)
	for {
		select {
		case <-p.quit:
			return
		case <-p.want:
		}
		for len(p.ready) < cap(p.ready) {
			name := fmt.Sprintf("%sahead-%d%s", journalPrefix, aheadNames.Add(1), journalSuffix)
			s, err := makeSegment(filepath.Join(p.dir, name))
			if err != nil {
				break
			}
			p.ready <- s // only run sends, and there is room
		}
	}
}

// stop ends run and removes the segments it left ready.
func (p *preparer) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	<-p.done
	for len(p.ready) > 0 {
		s := <-p.ready
		unmapSegment(s.mem)
		s.f.Close()
		_ = os.Remove(s.path)
	}
}

// makeSegment creates a mapped segment of mapSegmentSize at path, and
// writes a byte of each page through the mapping: the first write to a
// page of a shared file mapping faults (the file system marks the page
// dirty), tens of µs each on ext4, which it takes here rather than on the
// relay's path.
func makeSegment(path string) (jsegment, error) {
	f, err := openSegment(path)
	if err != nil {
		return jsegment{}, fmt.Errorf("open journal: %w", err)
	}
	mem, err := mapFile(f, mapSegmentSize)
	if err != nil {
		f.Close()
		_ = os.Remove(path)
		return jsegment{}, err
	}
	for i := 0; i < len(mem); i += os.Getpagesize() {
		mem[i] = 0
	}
	return jsegment{path: path, f: f, mem: mem}, nil
}
