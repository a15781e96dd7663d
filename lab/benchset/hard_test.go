package benchset

import (
	"reflect"
	"testing"
)

func TestMask(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"missing required argument: currency", "missing required argument: currency"},
		{"refund amount 120.00 exceeds captured amount 99.50", "refund amount <*> exceeds captured amount <*>"},
		{"currency EUR does not match the charge currency USD", "currency EUR does not match the charge currency USD"},
		{"insufficient stock for SKU-5ab: requested 4, available 2", "insufficient stock for <*>: requested <*>, available <*>"},
		{"postal code '94107' does not match city 'Oakland'", "postal code <*> does not match city <*>"},
		{"not enabled for service 'ground economy'.", "not enabled for service <*>."},
		{"pickup window 09:00-10:30 is too short", "pickup window <*> is too short"},
		{"", ""},
	} {
		if got := Mask(tc.in); got != tc.want {
			t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestGenerateHardDeterministic(t *testing.T) {
	e1, q1 := GenerateHard()
	e2, q2 := GenerateHard()
	if !reflect.DeepEqual(e1, e2) || !reflect.DeepEqual(q1, q2) {
		t.Fatal("GenerateHard is not deterministic")
	}
	ids := map[string]bool{}
	for _, e := range e1 {
		ids[e.ID] = true
	}
	for _, q := range q1 {
		if !ids[q.Want] {
			t.Errorf("%s wants unknown %s", q.ID, q.Want)
		}
	}
}
