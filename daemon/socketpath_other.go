//go:build !linux && !windows

package daemon

// maxSocketPath is the longest path a Unix socket address holds on macOS
// and the BSDs (sun_path is 104 bytes with its NUL).
const maxSocketPath = 103
