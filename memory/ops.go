package memory

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/traces"
)

// Kinds of Op.
const (
	OpHits    = "hits"    // count a hit on each of IDs
	OpForget  = "forget"  // soft-delete ID
	OpRestore = "restore" // undo a forget of ID
	OpPin     = "pin"     // set ID's Pinned to Pinned
	OpEdit    = "edit"    // apply Edit to the then-stored version of ID
	OpPurge   = "purge"   // erase IDs for good
)

// Op is one experience-store write the daemon keeps until the store
// takes it. Namespace "" means each id where it is found (hits: the
// default namespace).
type Op struct {
	Seq       uint64       `json:"seq"`
	Kind      string       `json:"kind"`
	Namespace string       `json:"namespace,omitempty"`
	IDs       []string     `json:"ids"`
	Pinned    bool         `json:"pinned,omitempty"`
	Edit      *EditRequest `json:"edit,omitempty"`
	At        time.Time    `json:"at"`        // the hit's time, or when the write was asked for
	QueuedAt  time.Time    `json:"queued_at"` // when it entered the queue
	// Refusals counts the tries the store refused, since RefusedSince.
	Refusals     int       `json:"refusals,omitempty"`
	RefusedSince time.Time `json:"refused_since,omitzero"`
}

// OpsStats is what `hindsight status` shows of the queue.
type OpsStats struct {
	Depth     int        `json:"depth"`
	Oldest    *time.Time `json:"oldest,omitempty"` // when the oldest waiting op was queued
	LastError string     `json:"last_error,omitempty"`
	Dropped   int        `json:"dropped,omitempty"` // ops the store refused for good, since start
}

// Defaults of Ops' backoff between tries while the store is
// unreachable.
const (
	DefaultOpsBackoff    = time.Second
	DefaultOpsMaxBackoff = time.Minute
	// DefaultOpsRefusedGrace is how long the store may refuse an op
	// (and at least minRefusals times) before it is dropped: a store that
	// just came back may not find what it holds until its shards load.
	DefaultOpsRefusedGrace = 2 * time.Minute
	minRefusals            = 3
)

// errRefusedForNow is Drain's error for an op the store refused, which is
// tried again before it is dropped.
var errRefusedForNow = errors.New("store op refused; tried again")

// storeOpsPrefix holds the queue's keys in the trace database, followed by
// the op's sequence number, big-endian, so that keys sort in queue order.
var storeOpsPrefix = []byte("storeops/")

func storeOpKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), storeOpsPrefix...), seq)
}

// Ops keeps, in order and durably, the experience-store writes made
// while the store could not be reached, and applies them once it answers.
//
// Ops are applied strictly in queue order by Run, one at a time: an op the
// store cannot take yet (hindsight.ErrStoreUnavailable) stops the pass and
// is tried again after a capped exponential backoff. An op the store
// refuses (an id purged meanwhile, or not loaded yet by a store that just
// came back) is tried again the same way, and dropped, logged and counted
// once refused for RefusedGrace and at least three times.
type Ops struct {
	// Apply performs one op against the store; a Service sets it to its
	// own when it is nil.
	Apply      func(ctx context.Context, op *Op) error
	Backoff    time.Duration // first wait; 0: DefaultOpsBackoff
	MaxBackoff time.Duration // cap of the wait; 0: DefaultOpsMaxBackoff
	// RefusedGrace is how long an op the store refuses is tried again
	// before it is dropped; 0: DefaultOpsRefusedGrace.
	RefusedGrace time.Duration

	db  *badger.DB
	log *slog.Logger

	mu       sync.Mutex // orders Enqueue against the loop's reads and deletes
	next     uint64
	applying uint64 // the op being applied (0: none), which Enqueue must not coalesce into
	depth    atomic.Int64
	kick     chan struct{}

	emu     sync.Mutex
	lastErr string
	dropped int
}

// NewOps returns the queue kept under storeops/ in the trace store's
// database (which the caller owns). Hand it to a Service (or set Apply)
// before Run.
func NewOps(t *traces.Store, logger *slog.Logger) (*Ops, error) {
	return newOps(t.DB(), logger)
}

func newOps(db *badger.DB, logger *slog.Logger) (*Ops, error) {
	if logger == nil {
		logger = slog.Default()
	}
	o := &Ops{db: db, log: logger, next: 1, kick: make(chan struct{}, 1)}
	err := db.View(func(txn *badger.Txn) error {
		it := badgerdb.KeyIterator(txn, storeOpsPrefix, false)
		defer it.Close()
		var n int64
		for it.Rewind(); it.Valid(); it.Next() {
			n++
			o.next = binary.BigEndian.Uint64(it.Item().Key()[len(storeOpsPrefix):]) + 1
		}
		o.depth.Store(n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open store-op queue: %w", err)
	}
	return o, nil
}

// Depth returns the number of ops waiting.
func (o *Ops) Depth() int { return int(o.depth.Load()) }

// Enqueue adds op at the end of the queue, durably, and returns its
// sequence number. A forget, restore or pin of the same experience as the
// last op waiting (not being applied) replaces that op, since only the
// last state counts; nothing else is coalesced (each hit record counts).
func (o *Ops) Enqueue(op Op) (uint64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now().UTC()
	op.QueuedAt = now
	if op.At.IsZero() {
		op.At = now
	}
	err := o.db.Update(func(txn *badger.Txn) error {
		if last, ok, err := o.lastOp(txn); err != nil {
			return err
		} else if ok && last.Seq != o.applying && sameState(&last, &op) {
			op.Seq, op.QueuedAt = last.Seq, last.QueuedAt
			return setOp(txn, &op)
		}
		op.Seq = o.next
		return setOp(txn, &op)
	})
	if err == nil {
		err = o.db.Sync() // the trace database syncs in the background
	}
	if err != nil {
		return 0, fmt.Errorf("queue store op: %w", err)
	}
	if op.Seq == o.next {
		o.next++
		o.depth.Add(1)
	}
	select {
	case o.kick <- struct{}{}:
	default:
	}
	return op.Seq, nil
}

// sameState reports whether b sets the same piece of state as a, which it
// may then replace: a forget or restore, or a pin, of one experience.
func sameState(a, b *Op) bool {
	flag := func(k string) int {
		switch k {
		case OpForget, OpRestore:
			return 1
		case OpPin:
			return 2
		}
		return 0
	}
	return flag(a.Kind) != 0 && flag(a.Kind) == flag(b.Kind) && a.Namespace == b.Namespace &&
		len(a.IDs) == 1 && len(b.IDs) == 1 && a.IDs[0] == b.IDs[0]
}

func setOp(txn *badger.Txn, op *Op) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	return txn.Set(storeOpKey(op.Seq), b)
}

// lastOp returns the op at the end of the queue.
func (o *Ops) lastOp(txn *badger.Txn) (Op, bool, error) {
	return o.edgeOp(txn, true)
}

// edgeOp returns the first op of the queue, or the last when last is set.
func (o *Ops) edgeOp(txn *badger.Txn, last bool) (Op, bool, error) {
	opt := badger.DefaultIteratorOptions
	opt.Prefix, opt.Reverse, opt.PrefetchValues = storeOpsPrefix, last, false
	it := txn.NewIterator(opt)
	defer it.Close()
	if last {
		it.Seek(storeOpKey(^uint64(0)))
	} else {
		it.Rewind()
	}
	var op Op
	if !it.ValidForPrefix(storeOpsPrefix) {
		return op, false, nil
	}
	if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &op) }); err != nil {
		return op, false, fmt.Errorf("decode store op %x: %w", it.Item().Key(), err)
	}
	return op, true, nil
}

// List returns the waiting ops, in queue order.
func (o *Ops) List() ([]Op, error) {
	var out []Op
	err := o.db.View(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.Prefix = storeOpsPrefix
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var op Op
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &op) }); err != nil {
				return fmt.Errorf("decode store op %x: %w", it.Item().Key(), err)
			}
			out = append(out, op)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list store ops: %w", err)
	}
	return out, nil
}

// Stats describes the queue.
func (o *Ops) Stats() OpsStats {
	st := OpsStats{Depth: o.Depth()}
	_ = o.db.View(func(txn *badger.Txn) error {
		if first, ok, err := o.edgeOp(txn, false); err == nil && ok {
			st.Oldest = &first.QueuedAt
		}
		return nil
	})
	o.emu.Lock()
	st.LastError, st.Dropped = o.lastErr, o.dropped
	o.emu.Unlock()
	return st
}
