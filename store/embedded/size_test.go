package embedded

import (
	"testing"
	"unsafe"
)

// TestFilterMetaSize keeps filterMeta at 32 bytes: filtering streams one
// a candidate.
func TestFilterMetaSize(t *testing.T) {
	if n := unsafe.Sizeof(filterMeta{}); n != 32 {
		t.Fatalf("filterMeta is %d bytes, want 32", n)
	}
}
