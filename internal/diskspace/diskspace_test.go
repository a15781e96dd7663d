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

func TestFitReserve(t *testing.T) {
	for _, c := range []struct{ def, size, want int64 }{
		{64 << 20, 8 << 20, 2 << 20},    // an 8 MiB home: a quarter of it
		{32 << 20, 8 << 20, 2 << 20},    // the outbox's too
		{64 << 20, 256 << 20, 64 << 20}, // from 256 MiB up, the default
		{64 << 20, 100 << 30, 64 << 20}, // a large disk
		{64 << 20, 0, 64 << 20},         // size unknown: the default
		{32 << 20, 1 << 20, 256 << 10},  // a tiny one
	} {
		if got := FitReserve(c.def, c.size); got != c.want {
			t.Errorf("FitReserve(%d, %d) = %d, want %d", c.def, c.size, got, c.want)
		}
	}
	for _, c := range []struct{ def, size, want int64 }{
		{4 << 20, 8 << 20, 128 << 10},
		{4 << 20, 1 << 30, 4 << 20},
		{1 << 20, 1 << 20, 64 << 10}, // at least 64 KiB
		{4 << 20, 0, 4 << 20},
	} {
		if got := FitAhead(c.def, c.size); got != c.want {
			t.Errorf("FitAhead(%d, %d) = %d, want %d", c.def, c.size, got, c.want)
		}
	}
}

func TestReserveForFitsTheFilesystem(t *testing.T) {
	dir := t.TempDir()
	size, err := Size(dir)
	if err != nil || size <= 0 {
		t.Fatalf("Size(%s) = %d, %v", dir, size, err)
	}
	if got, want := ReserveFor(dir, 0, 1<<62), size/4; got != want {
		t.Errorf("ReserveFor(a default above the filesystem) = %d, want a quarter of its %d bytes", got, size)
	}
	if got := ReserveFor(dir, 3<<20, 1<<62); got != 3<<20 {
		t.Errorf("ReserveFor with a reserve of 3 MiB set: %d", got)
	}
	if got := ReserveFor(dir, -1, 1<<62); got != 0 {
		t.Errorf("ReserveFor with a negative reserve: %d, want 0 (no check)", got)
	}
}
