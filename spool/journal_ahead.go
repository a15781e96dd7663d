package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

// A preparer readies mapped segments in a goroutine of its own, off the
// writer's lock: a new segment costs its zeros written, its mapping made
// and a fault on each page's first write (hundreds of µs on a loaded
// machine, the copies of a thousand steps), and an emptied one its
// zeroing (as many faults once the kernel wrote its pages back), which
// the relay would otherwise pay or wait for when segments are in flight
// faster than they empty (the daemon behind, a burst). It is started the
// first time a segment fills while no spare is left; from then on it
// keeps segmentsAhead segments ready and takes the emptied segments from
// drop (zeroed and kept for reuse up to mapSpares ready, else removed),
// and close stops it and removes what it holds.
type preparer struct {
	dir      string
	want     chan struct{} // begin found no spare
	recycled chan jsegment // emptied segments, to zero or remove
	ready    chan jsegment // mapped, zeroed segments of mapSegmentSize or more
	quit     chan struct{}
	done     chan struct{}
}

// segmentsAhead is how many new segments a preparer keeps ready: two, so
// that one is ready while the next is made. A variable so that benchmarks
// can measure the journal without a preparer (0).
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
		// recycled has room for the segments in flight (MaxMemBytes
		// bounds them: 11 of 256 KiB by default) several times over;
		// drop does the work itself beyond it.
		j.ahead = &preparer{dir: j.dir, want: make(chan struct{}, 1), recycled: make(chan jsegment, 4*mapSpares),
			ready: make(chan jsegment, mapSpares), quit: make(chan struct{}), done: make(chan struct{})}
		go j.ahead.run()
	}
	select {
	case j.ahead.want <- struct{}{}:
	default:
	}
}

// recycle hands an emptied mapped segment to the preparer, to zero and
// make ready or to remove, and reports whether it took it.
func (p *preparer) recycle(s jsegment) bool {
	if p == nil {
		return false
	}
	select {
	case p.recycled <- s:
		return true
	default:
		return false
	}
}

// take returns a ready segment with room for need bytes, if one is.
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

// run zeroes the segments recycled, and makes segments until
// segmentsAhead are ready each time it is asked. A segment it cannot make
// is left to begin, which makes its own and reports what fails.
func (p *preparer) run() {
	defer close(p.done)
	for {
		select {
		case <-p.quit:
			return
		case s := <-p.recycled:
			if len(p.ready) >= mapSpares {
				removeSegment(s)
				continue
			}
			clear(s.mem[:s.size])
			s.size, s.last, s.cleared = 0, 0, 0
			p.put(s)
			continue
		case <-p.want:
		}
		for len(p.ready) < segmentsAhead {
			name := fmt.Sprintf("%sahead-%d%s", journalPrefix, aheadNames.Add(1), journalSuffix)
			s, err := makeSegment(filepath.Join(p.dir, name))
			if err != nil {
				break
			}
			p.put(s)
		}
	}
}

// put makes s ready, or removes it if there is no room.
func (p *preparer) put(s jsegment) {
	select {
	case p.ready <- s:
	default:
		removeSegment(s)
	}
}

// stop ends run and removes the segments it holds.
func (p *preparer) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	<-p.done
	for _, c := range []chan jsegment{p.recycled, p.ready} {
		for len(c) > 0 {
			removeSegment(<-c)
		}
	}
}

// removeSegment unmaps, closes and removes a mapped segment.
func removeSegment(s jsegment) {
	unmapSegment(s.mem)
	s.f.Close()
	_ = os.Remove(s.path)
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
