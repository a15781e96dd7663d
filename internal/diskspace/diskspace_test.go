package diskspace

import (
	"errors"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "4k": 4 << 10, "32MiB": 32 << 20, "1g": 1 << 30, " 2M ": 2 << 20} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseBytes("lots"); err == nil {
		t.Error("ParseBytes(lots) succeeded")
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	if err := Check(dir, 1, 0); err != nil {
		t.Fatalf("a reserve of one byte: %v", err)
	}
	if err := Check(dir, 1<<62, 0); !errors.Is(err, ErrLow) {
		t.Fatalf("a reserve larger than any disk: %v, want ErrLow", err)
	}
	if err := Check(dir, 0, 1<<62); err != nil {
		t.Fatalf("a reserve of 0 turns the check off, got %v", err)
	}
}
