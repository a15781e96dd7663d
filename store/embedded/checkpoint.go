package embedded

import (
	"fmt"
	"time"
)

// Checkpoints keep the snapshot near the database, so that a start after
// a crash replays little (see replay). The store counts the experiences
// it writes (puts, hits, imports) since the snapshot on disk; a
// background loop takes a new snapshot when they reach a fiftieth of the
// experiences held (at least minCheckpoint), or at once when no snapshot
// serves (none yet, or a purge or an embedder change voided it). An
// import takes one before it returns when it is due; Close takes one
// only when none serves, and otherwise leaves the writes since the last
// one to the next Open's replay. Each checkpoint first deletes the change
// keys (see records.go) that the snapshot on disk covers, and after its
// snapshot the bulk marker when that covers the writes it stands for.

// DefaultCheckpointInterval is how often the background loop checks
// whether a checkpoint is due.
const DefaultCheckpointInterval = 10 * time.Second

// minCheckpoint is the fewest writes that make a checkpoint due while a
// snapshot serves: replaying them costs a few milliseconds.
const minCheckpoint = 1000

// checkpointDue reports whether a new snapshot is due for an index of
// live experiences.
func (s *Store) checkpointDue(live int) bool {
	n := s.dirty.Load()
	if s.covers.Load() == 0 {
		return n > 0
	}
	return n >= int64(max(minCheckpoint, live/50))
}

// checkpoint writes a snapshot of the index as it is now, when one is
// due (or always, with force). The index is copied (compacted, in key
// order) under the read lock, so that searches go on, and written out
// without it. The caller holds neither s.snapMu nor s.mu.
func (s *Store) checkpoint(force bool) error {
	if s.snapPath == "" {
		return nil
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	return s.checkpointHeld(force)
}

// checkpointHeld is checkpoint for a caller that holds s.snapMu.
func (s *Store) checkpointHeld(force bool) error {
	s.mu.RLock()
	if s.closed || (!force && !s.checkpointDue(s.idx.live)) {
		s.mu.RUnlock()
		return nil
	}
	s.mu.RUnlock()
	// The change keys the snapshot on disk covers go first, so that
	// their deletions fall below the new snapshot's version and no
	// replay meets them; should this snapshot not be written, the one on
	// disk still covers what they named.
	if prev := s.covers.Load(); prev > 0 {
		if err := s.dropChanges(prev); err != nil {
			// Kept, they cost a start that replays them time, not truth.
			s.log.Warn("experience index: change keys kept", "err", err)
		}
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil
	}
	// Every write of the store takes s.mu for writing: the index holds
	// all that Badger holds up to covers, and nothing above.
	// The copy reads its vectors from the index's chunks, which stay as
	// they are until written out: writes go to new slots, a vector
	// changed in place to a copy of its chunk (freeze), and a snapshot
	// mapping the index leaves is unmapped after (setIndex).
	covers := s.readTs()
	// The marker goes once a snapshot covers every write made without
	// change keys: none is under way, and no bulk marks again meanwhile.
	unmark, gen := s.marked && !s.unmarked, s.markGen
	cx, embID := s.idx.compactTo(true, false), s.embID
	s.idx.freeze(int32(len(s.idx.docs))) // read only by writers, which hold s.mu for writing
	s.snapReaders.Add(1)
	n := s.dirty.Swap(0) // later writes count towards the next one
	s.mu.RUnlock()
	err := writeSnapshot(s.snapPath, cx, s.gen, covers, embID)
	s.mu.Lock()
	s.idx.thaw()
	if s.snapReaders.Add(-1) == 0 {
		for _, r := range s.unmapLater {
			if uerr := unmapRegion(r); uerr != nil {
				s.log.Warn("unmap experience index snapshot", "err", uerr)
			}
		}
		s.unmapLater = nil
	}
	s.mu.Unlock()
	if err != nil {
		s.dirty.Add(n)
		return err
	}
	s.covers.Store(covers)
	if unmark {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.markGen == gen && !s.closed {
			return s.unmark()
		}
	}
	return nil
}

// readTs returns the version of Badger's latest committed write.
func (s *Store) readTs() uint64 {
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	return txn.ReadTs()
}

// checkpointLoop takes checkpoints when due until stop is closed.
func (s *Store) checkpointLoop(every time.Duration) {
	defer close(s.loopDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.bulk.Load() > 0 {
				continue // the last end of BeginBulk takes one
			}
			if err := s.checkpoint(false); err != nil {
				s.log.Warn("experience index snapshot not written; a start after a crash replays more", "err", err)
			}
		}
	}
}

// startCheckpoints starts checkpointLoop for an on-disk database.
func (s *Store) startCheckpoints() {
	every := s.opt.CheckpointInterval
	if s.snapPath == "" || every < 0 {
		return
	}
	if every == 0 {
		every = DefaultCheckpointInterval
	}
	s.stop, s.loopDone = make(chan struct{}), make(chan struct{})
	go s.checkpointLoop(every)
}

// stopCheckpoints stops checkpointLoop and waits for it.
func (s *Store) stopCheckpoints() {
	if s.stop != nil {
		close(s.stop)
		<-s.loopDone
		s.stop = nil
	}
}

// voidSnapshot makes the snapshot on disk unusable before a write that
// replay cannot see (a purge erases keys without a trace): it removes the
// file. The caller holds s.snapMu.
func (s *Store) voidSnapshot() error {
	s.covers.Store(0)
	s.dirty.Add(1)
	if s.snapPath == "" {
		return nil
	}
	if err := removeFile(s.snapPath); err != nil {
		return fmt.Errorf("remove index snapshot: %w", err)
	}
	return nil
}
