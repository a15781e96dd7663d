// Package platformcheck holds no code: its test checks that the release
// configuration (.goreleaser.yaml) and the Makefile's cross check
// (CROSS_PAIRS, run by `make cross` before `make test`) cover the same six
// GOOS/GOARCH pairs and both binaries.
package platformcheck
