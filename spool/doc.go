// Package spool is a sidecar's outbox: the durable queue of steps between
// the sidecar's capture.Recorder and the daemon. It is the only code that
// knows the outbox directory's layout (see layout.go): the daemon lists
// outboxes (List) and drains those of dead sidecars (DrainOrphans), the
// sidecar reports its counters into its own (WriteStats), and retention
// removes what was set aside (RemoveSetAside), all through it.
//
// # Durability
//
// Append writes each batch of steps to the outbox's journal (on Linux a
// copy into a shared file mapping, elsewhere one write per batch: safe
// from SIGKILL once it returns), and the spool delivers them
// to the daemon from memory, a batch every 250 ms. A step the daemon has
// not acknowledged 5 s after it was journaled (any step while the daemon
// is unreachable, or with no daemon, or past MaxMemBytes) is written to
// the outbox's Badger, and the journal segments whose steps all left
// memory are removed; in a mapped segment a step's record is cleared as
// soon as the step leaves memory (see journal). A
// drainer of a dead sidecar's outbox hands its journal to the database and
// delivers it again; the daemon drops the steps it has.
//
// Steps that cannot be made safe before their exchanges' answers are
// relayed (capture's queue, or a journal that does not take them) are
// counted in the outbox's ledger first (see ledger: Owe, AppendOwed,
// Settle): a drainer of a dead sidecar's outbox counts those it was still
// owed as lost, so none is lost uncounted.
//
// When the journal cannot be written, the spool delivers every 10 ms and
// writes to Badger what the daemon has not acknowledged 30 ms after its
// exchange ended (safe once the write returns: the memtable's log is a
// shared file mapping), so a step relayed more than 50 ms before a SIGKILL
// is acknowledged or on disk. A sync within 20 ms of a Badger write guards
// against machine crashes. The database is opened 15 ms before the first
// such write is due, and closed again once empty and a minute without
// writes: while the daemon keeps up, a sidecar runs no Badger at all.
//
// Undelivered steps wait on disk up to the retention period (7 days; a
// warning at 80%). A step the daemon refuses is delivered as a stub and
// kept whole in .rejected/. A disk that cannot be written (full, corrupt)
// is logged and counted, and steps are held in memory up to a bound and
// delivered from there (see diskspace.go).
package spool
