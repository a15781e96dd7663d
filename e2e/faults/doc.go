// Package faults holds fault-injection tests with real processes: a
// sidecar (`hindsight wrap`) in front of a scripted server, its daemon, and
// a Hindsight home on a filesystem the test fills (a tmpfs it mounts, so
// the tests need root; they skip with a message otherwise).
package faults
