// Package testkit holds the small helpers tests across the module share:
// the golden-file compare (Golden, with one -update flag), polling until a
// condition holds (WaitFor) or a process has gone (WaitGone), the
// process's CPU time (ProcessCPU), the agent's end of a line-based stdio
// stream (LineClient, StartPiped), and a buffer safe for concurrent
// writers (SyncBuffer). Its subpackages give tests the real
// programs and servers they run against.
//
// Only test files import it. A package whose tests import it must not
// define an -update flag of its own: testkit's is the one.
package testkit
