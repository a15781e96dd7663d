// Package wire encodes and decodes steps and tasks as JSON: the full form
// (AppendStep, byte for byte what json.Marshal writes for a
// hindsight.Step), the compact form a sidecar's outbox stores and sends
// (AppendCompactStep, Derive, UnmarshalCompact), and the ingest scanner
// the daemon reads step batches with (DecodeBatch, DecodeRaws, DecodeStep,
// EachValue). It also holds the JSON helpers the sidecar and the daemon
// share: Valid and the Skip functions, the string escapers, AppendTime
// and the zero-copy views.
//
// The scanner reads keys in any order; it is fastest in AppendStep's
// (stepKeys). What it does not take it leaves to encoding/json, with the
// same result.
package wire
