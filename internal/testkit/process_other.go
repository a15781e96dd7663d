//go:build !unix

package testkit

import (
	"os"
	"time"
)

// ProcessGone reports whether process pid has exited, as far as the
// system lets it be found.
func ProcessGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	p.Release()
	return false
}

// ProcessCPU is not measured on this system: it returns 0.
func ProcessCPU() time.Duration { return 0 }
