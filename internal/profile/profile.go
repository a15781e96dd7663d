// Package profile starts the CPU profiles that measurements ask for by
// environment variable (HINDSIGHT_CPUPROFILE for a sidecar,
// HINDSIGHT_DAEMON_CPUPROFILE for the daemon, RELAYBENCH_CPUPROFILE for the
// benchmark's byte relay).
package profile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// StartCPU writes this process's CPU profile to path until stop is called.
func StartCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
