package memory

import (
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

func TestProvenanceMachine(t *testing.T) {
	e := &hindsight.Experience{Origin: "rules", SourceAgent: "claude", SourceMachine: "build-7/3fa2c1d0"}
	for _, tc := range []struct {
		p    Provenance
		want bool
	}{
		{Provenance{}, true},
		{Provenance{SourceMachine: "build-7/3fa2c1d0"}, true},
		{Provenance{SourceMachine: "build-7"}, true},
		{Provenance{SourceMachine: "build-7/00000000"}, false},
		{Provenance{SourceMachine: "build-8"}, false},
		{Provenance{SourceMachine: "build"}, false},
		{Provenance{SourceMachine: "build-7", SourceAgent: "cursor"}, false},
		{Provenance{SourceMachine: "build-7", Origin: "rules", SourceAgent: "claude"}, true},
	} {
		if got := tc.p.Match(e); got != tc.want {
			t.Errorf("%+v.Match = %v, want %v", tc.p, got, tc.want)
		}
	}
	if (Provenance{SourceMachine: "x"}).Empty() {
		t.Error("a machine filter is not empty")
	}
}
