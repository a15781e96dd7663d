package capture

import (
	"sync/atomic"

	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/prometheus/client_golang/prometheus"
)

// Stats is a snapshot of a Recorder's counters. It is a flat report with
// one field per counter that status and metrics show, so it is wide.
type Stats struct {
	Captured    int64 // steps built and handed to the outbox
	Queued      int64 // exchanges waiting for the worker now
	QueuedBytes int64 // their size in bytes
	// QueuedBytesPeak is the most QueuedBytes has been: at most
	// MaxQueueBytes, or one exchange larger than that alone.
	QueuedBytesPeak  int64
	Dropped          int64 // exchanges lost: queue over its bound, recorder closed, memory bound hit
	Redactions       int64 // secrets replaced
	Spilled          int64 // steps written to the disk outbox: not acknowledged by the daemon in time, or no daemon
	Held             int64 // steps kept in memory now because the outbox could not be written
	WriteErrors      int64 // failed outbox writes
	Corrupt          int64 // outboxes found corrupt and moved aside
	Delivered        int64 // steps accepted by the daemon
	DeliveryFailures int64 // failed delivery attempts
	Rejected         int64 // steps the daemon refused (kept aside until retention)
	Expired          int64 // undelivered steps removed after the retention period
	Depth            int64 // undelivered steps in the outbox now (disk and memory)
	// ExchangesSpilled counts exchanges that found the capture queue full
	// and were sealed into the spill on disk (see Recorder);
	// ExchangesUnspilled those read back from it to be recorded.
	ExchangesSpilled   int64
	ExchangesUnspilled int64
	SpillBytes         int64 // the spill's size on disk now
	// SpillLost counts spilled exchanges lost unread: unreadable, or found
	// by this process (DrainOrphans) in the spill of a sidecar that died.
	SpillLost int64
	// Truncated counts steps stored with a body cut (MaxBodyBytes).
	Truncated int64
	// DroppedDiskFull counts the steps among Dropped lost because the disk
	// was short of space (see spool.Spool); HeldBytes is the size of the steps
	// held in memory now.
	DroppedDiskFull int64
	HeldBytes       int64
}

// counters are the live values behind Stats and the Prometheus metrics of
// capture itself; the outbox's are the spool's (spool.Counts).
type counters struct {
	captured, queued, queuedBytes, redactions     atomic.Int64
	spilledEx, unspilledEx, spillBytes, spillLost atomic.Int64
	truncated                                     atomic.Int64
	queuedPeak                                    atomic.Int64 // see Stats.QueuedBytesPeak

	losses losses.Tally // exchanges and steps lost, and the ledger
}

// snapshot returns capture's counters with the outbox's (ob).
func (c *counters) snapshot(ob spool.Counts) Stats {
	return Stats{
		Captured: c.captured.Load(), Queued: c.queued.Load(), QueuedBytes: c.queuedBytes.Load(),
		QueuedBytesPeak: c.queuedPeak.Load(),
		Dropped:         c.losses.Lost() + ob.Dropped, Redactions: c.redactions.Load(), Spilled: ob.Spilled,
		Held: ob.Held, WriteErrors: ob.WriteErrors, Corrupt: ob.Corrupt,
		Delivered: ob.Delivered, DeliveryFailures: ob.DeliveryFailures,
		Rejected: ob.Rejected, Expired: ob.Expired, Depth: ob.Depth,
		ExchangesSpilled: c.spilledEx.Load(), ExchangesUnspilled: c.unspilledEx.Load(),
		SpillBytes: c.spillBytes.Load(), SpillLost: c.spillLost.Load() + spillLostTotal.Load(),
		Truncated: c.truncated.Load(), DroppedDiskFull: c.losses.DiskFull() + ob.DroppedDiskFull, HeldBytes: ob.HeldBytes,
	}
}

// register exposes c on reg as hindsight_capture_* metrics, and ob's
// hindsight_outbox_* ones, labelled with the outbox id. A nil reg
// registers nothing.
func (c *counters) register(reg prometheus.Registerer, ob *spool.Spool) ([]prometheus.Collector, error) {
	if reg == nil {
		return nil, nil
	}
	labels := prometheus.Labels{"source": ob.ID()}
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, f func() int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(f()) })
	}
	cs := []prometheus.Collector{
		counter("hindsight_capture_steps_total", "Steps built from relayed exchanges.", &c.captured),
		gauge("hindsight_capture_queued", "Exchanges waiting to be redacted and stored.", c.queued.Load),
		gauge("hindsight_capture_queued_bytes", "Bytes of exchanges waiting to be redacted and stored.", c.queuedBytes.Load),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hindsight_capture_dropped_total",
			Help: "Exchanges that could not be recorded (queue full, closed, memory bound).", ConstLabels: labels},
			func() float64 { return float64(c.losses.Lost() + ob.Counts().Dropped) }),
		counter("hindsight_capture_redactions_total", "Secrets replaced by placeholders.", &c.redactions),
		counter("hindsight_capture_truncated_total", "Steps stored with a body cut to the size limit.", &c.truncated),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hindsight_outbox_dropped_disk_full_total",
			Help: "Steps lost because the disk was short of space and the memory bound was reached.", ConstLabels: labels},
			func() float64 { return float64(c.losses.DiskFull() + ob.Counts().DroppedDiskFull) }),
		counter("hindsight_capture_spilled_total", "Exchanges spilled to disk, sealed, because the capture queue was full.", &c.spilledEx),
		counter("hindsight_capture_unspilled_total", "Spilled exchanges read back and queued for recording.", &c.unspilledEx),
		gauge("hindsight_capture_spill_bytes", "Bytes of sealed exchanges in the spill on disk.", c.spillBytes.Load),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hindsight_capture_spill_lost_total",
			Help:        "Spilled exchanges lost unread: unreadable, or left by a sidecar that died (found by this process).",
			ConstLabels: labels}, func() float64 { return float64(c.spillLost.Load() + spillLostTotal.Load()) }),
	}
	cs = append(cs, ob.Metrics()...)
	for i, col := range cs {
		if err := reg.Register(col); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return cs, nil
}

// notePeak records v, the queue's accounted size just after an exchange
// joined it, in Stats.QueuedBytesPeak.
func (c *counters) notePeak(v int64) {
	for p := c.queuedPeak.Load(); v > p && !c.queuedPeak.CompareAndSwap(p, v); p = c.queuedPeak.Load() {
	}
}
