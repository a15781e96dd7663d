// Package capture records what a Hindsight sidecar relays: it turns every
// request/response pair (a proxy.Exchange) into a redacted, tagged
// hindsight.Step and delivers it to the daemon through the sidecar's own
// outbox (package spool), which keeps on disk what the daemon has not
// taken.
//
// # Wiring
//
//	red, err := capture.NewRedactor(capture.RedactorConfig{Keys: …, Patterns: …})
//	rec, err := capture.New(capture.Options{Home: home, Server: name, Redactor: red,
//		MaxBodyBytes: cfg.Capture.MaxBodyBytes, Deliverer: daemonClient, Logger: log,
//		Retention: cfg.Outbox.Retention})
//	hooks.Exchange = rec.Hook
//	hooks.Record = rec.Record // journal steps before their answers are relayed
//	…
//	rec.Close(ctxWithDeadline) // final drain
//
// and, in a sidecar at start or in the daemon, capture.DrainOrphans(ctx,
// home, deliverer) delivers the outboxes of sidecars that died.
//
// # Redaction
//
// A Redactor (see its doc) combines the gitleaks v8 default rule set, read
// through gitleaks' config package and run as gitleaks' Detector runs each
// rule on a text (its detect package, which links file, archive and git
// scanning, stays out of the binaries), with a keyword prefilter and each
// rule compiled once per process, with sensitive JSON key names, built-in
// text rules and the user's rules.
// A secret becomes [REDACTED:<rule id>]: [REDACTED:github-pat],
// [REDACTED:key:password], [REDACTED:jwt]… JSON stays valid. Redaction
// happens before a step reaches disk: the outbox, its value log and
// everything delivered hold redacted data only.
//
// # Steps
//
// BuildStep fills a Step from an Exchange: method, tool, arguments and
// result, isError, the JSON-RPC error, an error code, the session's client
// identity, notifications, injections, the explicit task (the request's
// _meta["io.hindsight/task"], else the session's HINDSIGHT_TASK_ID), and
// the redacted request and response as relayed. Bodies over MaxBodyBytes
// are replaced by a JSON string holding their first MaxBodyBytes bytes; a
// Truncation keeps the field, the original size and the SHA-256 of the
// redacted original.
//
// Error codes, most specific first: "http-NNN" (an HTTP 4xx/5xx status in
// the error text), "errno-NAME" (ENOENT, EACCES, ECONNREFUSED… or their
// usual wording), "timeout", then "jsonrpc-N" for the JSON-RPC code
// (-32602 → "jsonrpc-32602"), and "transport" when the sidecar ended the
// request because the server went away.
//
// Causal tags: cancelled, timeout (error code timeout, errno-ETIMEDOUT,
// http-408, http-504), failure, success, refined by a Tagger with the
// session's history into retry (the same tool and arguments as the
// previous call) and recovery (a success after a failure of the same
// tool). See Tagger.
//
// # Durability and back-pressure
//
// Recorder.Record takes the exchanges whose answers the relay is about to
// write to the agent (on stdio those of a burst, on HTTP one per response)
// before it writes them: it builds, tags and numbers their steps on the
// relay's goroutine and has the outbox journal them, so a sidecar killed
// as soon as the agent has its answers loses none; Hook then skips them.
// What Record leaves (see its doc) goes through the queue:
//
// Recorder.Hook only queues; the queue is handed to the workers in batches,
// a short linger after the first exchange of a batch (or at once when a
// batch is full or Sync asks). Workers redact in parallel; one committer
// restores the order the exchanges completed in, tags, numbers (Source =
// outbox id, Seq gap-free from 1) and hands batches to the sidecar's
// outbox (package spool), which journals them, delivers them to the daemon
// and writes to its Badger what the daemon does not take in time; see
// spool for its timings and what a SIGKILL may lose. The
// hindsight_capture_commit_delay_seconds histogram shows how long after an
// exchange ends its step reaches the outbox.
//
// The queue is bounded (Options.MaxQueueBytes, built steps included), and
// while the daemon is behind the outbox holds the committer back once half
// its memory bound is taken, so a flood backs up into the queue rather
// than into the outbox's database (see MemoryBudget). Unredacted data may
// not reach disk readable and the relay may not wait, so when the queue is
// full exchanges spill: they are sealed with AES-256-GCM under a key that
// exists only in the sidecar's memory, appended to files under the
// outbox's spill/ directory, and read back, in order, redacted and
// recorded as capture catches up (hindsight_capture_spilled_total,
// _unspilled_total, a log line at most every ten seconds). A crash loses
// what is spilled; the next sidecar or the daemon deletes it unread and
// counts it (hindsight_capture_spill_lost_total). Past the spill's bound
// (Options.MaxSpillBytes) exchanges are dropped and counted
// (Stats.Dropped, hindsight_capture_dropped_total).
package capture
