// Package platformcheck holds no code: its test checks that the release
// configuration (.goreleaser.yaml) and the Makefile's cross checks
// (CROSS_PAIRS: `make vet-cross`, which `make test` runs, and `make cross`)
// cover the same six
// GOOS/GOARCH pairs and both binaries.
package platformcheck
