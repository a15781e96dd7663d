// Package e2e holds Hindsight's end-to-end tests: whole-binary and
// multi-process tests that build the hindsight binaries from this module
// (lab/testkit/testbin, once per test binary, removed by TestMain) and run
// them as users and agents do: the daemon on a real socket, sidecars in
// front of real MCP servers, a collector, a Weaviate, more than one
// machine's daemon. Its subpackages are the interoperability tests against
// the reference MCP servers and SDKs (interop) and fault injection
// (faults).
//
// It has no code of its own; go test ./e2e/... runs it (long: minutes).
package e2e
