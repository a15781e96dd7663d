package spool

import (
	"sync/atomic"

	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/prometheus/client_golang/prometheus"
)

// Counts is a snapshot of a spool's counters.
type Counts struct {
	Spilled          int64 // steps written to the database: not acknowledged in time, or no daemon
	Held             int64 // steps kept in memory now because the database could not be written
	HeldBytes        int64 // their size
	WriteErrors      int64 // failed writes to disk
	Corrupt          int64 // databases found corrupt and moved aside
	Delivered        int64 // steps accepted by the daemon
	DeliveryFailures int64 // failed delivery attempts
	Rejected         int64 // steps the daemon refused (kept aside until retention)
	Expired          int64 // undelivered steps removed after the retention period
	Depth            int64 // undelivered steps now (disk and memory)
	Dropped          int64 // steps lost (see internal/losses for the reasons)
	DroppedDiskFull  int64 // those of Dropped lost because the disk was short of space
}

// counters are the live values behind Counts and the spool's metrics.
type counters struct {
	spilled, held, heldBytes, writeErrors, corrupt, delivered, deliveryFailures,
	rejected, expired, depth atomic.Int64

	losses losses.Tally // steps lost, and the ledger (see RecordLosses)
}

func (c *counters) snapshot() Counts {
	return Counts{
		Spilled: c.spilled.Load(), Held: c.held.Load(), HeldBytes: c.heldBytes.Load(),
		WriteErrors: c.writeErrors.Load(), Corrupt: c.corrupt.Load(), Delivered: c.delivered.Load(),
		DeliveryFailures: c.deliveryFailures.Load(), Rejected: c.rejected.Load(), Expired: c.expired.Load(),
		Depth: c.depth.Load(), Dropped: c.losses.Lost(), DroppedDiskFull: c.losses.DiskFull(),
	}
}

// Counts returns the spool's counters.
func (o *Spool) Counts() Counts { return o.c.snapshot() }

// Metrics returns the spool's hindsight_outbox_* metrics, labelled with
// its id (source), for the caller to register. The steps it drops are
// not among them: the Recorder counts them with its own (Counts.Dropped,
// Counts.DroppedDiskFull).
func (o *Spool) Metrics() []prometheus.Collector {
	c := o.c
	labels := prometheus.Labels{"source": o.id}
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		counter("hindsight_outbox_spilled_total", "Steps written to the disk outbox because the daemon had not acknowledged them in time (or was unreachable).", &c.spilled),
		gauge("hindsight_outbox_held", "Steps held in memory because the outbox could not be written.", &c.held),
		counter("hindsight_outbox_write_errors_total", "Failed writes to the outbox.", &c.writeErrors),
		counter("hindsight_outbox_corrupt_total", "Outboxes found corrupt and moved aside.", &c.corrupt),
		counter("hindsight_outbox_delivered_total", "Steps delivered to the daemon.", &c.delivered),
		counter("hindsight_outbox_delivery_failures_total", "Failed delivery attempts.", &c.deliveryFailures),
		counter("hindsight_outbox_rejected_total", "Steps the daemon refused.", &c.rejected),
		counter("hindsight_outbox_expired_total", "Undelivered steps removed after the retention period.", &c.expired),
		gauge("hindsight_outbox_held_bytes", "Bytes of steps held in memory because the outbox could not be written.", &c.heldBytes),
		gauge("hindsight_outbox_depth", "Undelivered steps (disk and memory).", &c.depth),
	}
}
