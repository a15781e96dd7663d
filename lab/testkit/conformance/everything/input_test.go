package main

import (
	"strings"
	"testing"
)

// TestSeal: a state comes back as it was sealed; altered, it is refused.
func TestSeal(t *testing.T) {
	st := seal("round2:Ada")
	if p, ok := unseal(st); !ok || p != "round2:Ada" {
		t.Fatalf("unseal(seal(x)) = %q, %v", p, ok)
	}
	for _, bad := range []string{st + "-TAMPERED", "round2:Eve" + st[strings.LastIndexByte(st, '.'):], "round2:Ada", "", "."} {
		if p, ok := unseal(bad); ok {
			t.Errorf("unseal(%q) = %q, accepted", bad, p)
		}
	}
}

func FuzzUnseal(f *testing.F) {
	f.Add(seal("round1"))
	f.Add("round1.")
	f.Fuzz(func(t *testing.T, state string) {
		p, ok := unseal(state)
		if ok && seal(p) != state {
			t.Fatalf("unseal(%q) accepted a state seal does not make", state)
		}
	})
}
