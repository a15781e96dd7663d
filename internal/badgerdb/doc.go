// Package badgerdb holds what every Badger database of Hindsight shares:
// the daemon's options (Options), the Compactor that replaces Badger's own
// compactors, and the adapter that routes Badger's log lines to log/slog
// (NewLogger).
package badgerdb
