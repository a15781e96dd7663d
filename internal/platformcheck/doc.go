// Package platformcheck holds no code: its test checks that the release
// configuration (.goreleaser.yaml) and the Makefile's cross checks
// (CROSS_PAIRS: `make vet-cross`, which `make test` runs, and `make cross`)
// cover the same six GOOS/GOARCH pairs and both binaries; and that make
// test's script (.ci/test) runs its phases in order, each with the
// environment it needs, and fails naming every phase that failed.
package platformcheck
