//go:build !linux

package spool

import (
	"errors"
	"os"
)

// canMap reports that journal segments are written here, not mapped.
const canMap = false

func mapSegment(*os.File, int) ([]byte, error) {
	return nil, errors.New("map journal: not on this platform")
}

func unmapSegment([]byte) {}
