package daemon

// maxSocketPath is the longest path a Unix socket address holds on Linux
// (sun_path is 108 bytes with its NUL).
const maxSocketPath = 107
