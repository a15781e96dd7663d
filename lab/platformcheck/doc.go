// Package platformcheck holds no code: its test checks that the release
// configuration (.goreleaser.yaml) and `make cross` (CROSS_PAIRS) cover the
// same six GOOS/GOARCH pairs and both binaries; that the pairs `make
// vet-cross` vets (VET_PAIRS, which `make test` runs) compile every file a
// released pair compiles; and that make
// test's script (.ci/test) runs its phases in order, each with the
// environment it needs, and fails naming every phase that failed.
package platformcheck
