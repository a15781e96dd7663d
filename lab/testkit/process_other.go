//go:build !unix

package testkit

import "os"

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
