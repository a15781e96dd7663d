// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in lab/testdeps/npm) in
// server mode against the test everything-server
// (lab/testkit/conformance/everything), once directly and once through
// `hindsight serve`, for each requirement set (2025-11-25 and 2026-07-28),
// and compares the two check by check: a check that passes directly must
// pass through Hindsight.
//
// It has no code of its own; go test -v ./e2e/conformance runs it and
// prints the figures.
package conformance
