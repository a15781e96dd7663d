// Package traces is the daemon's trace store: every step the sidecars
// recorded, grouped into tasks, in one Badger database (Open).
//
// What it stores. A step is stored as its sidecar encoded it (whole, or
// compact: its arguments and result left to be derived from its request
// and response), known by its Source and Seq, so a batch delivered twice
// is stored once (Ingest, IngestRaw, IngestBatch). Reads give every step
// back whole. Task records hold what a task's listing needs (times,
// servers, counts, finality, reflection state) without its steps. The key
// layout is in records.go; the reflection queue and the daemon's store
// operations keep their own prefixed keys in the same database (QueueDB,
// DB).
//
// Segmentation. Ingest puts each step into a task by, in this order: the
// task the step names explicitly; the agent host process of a stdio
// sidecar; the HTTP session; lacking all, the sidecar that sent it. A
// group's task ends after an idle gap (Options.IdleGap), when the agent
// says it is finished (MarkFinal), or once all its sessions closed
// (CloseSession); FinalizeIdle makes the idle ones final. Step indices are
// assigned in arrival order, gap-free per task, and never change, so
// reflection can cite them.
//
// Retention and purge. TasksBefore and DataBytes say which tasks a
// retention policy may drop; PurgeTasks removes tasks and erases their
// bytes from the files (package erase), not by soft delete.
//
// Streaming reads. Tasks lists task records; Task reads a task with its
// steps; StreamTask and Steps hand steps one at a time from one snapshot,
// so an export or a long task is never held in memory; ReflectionSource
// gives reflection a long task's steps in part.
package traces
