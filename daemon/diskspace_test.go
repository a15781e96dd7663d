package daemon

import (
	"errors"
	"testing"
	"time"
)

// TestSpaceGuardFreeSpace checks when the guard asks the filesystem for
// its free space, and that in between it counts what it let through.
func TestSpaceGuardFreeSpace(t *testing.T) {
	const reserve = 64 << 20
	free, asked := int64(reserve+1<<20), 0
	g := &SpaceGuard{Dir: t.TempDir(), Reserve: reserve, Logger: quiet, statfs: func(string) (int64, error) {
		asked++
		return free, nil
	}}
	check := func(need int64, wantAsked int, wantErr bool) {
		t.Helper()
		err := g.Check(need)
		if (err != nil) != wantErr || (err != nil && !errors.Is(err, ErrDiskFull)) {
			t.Fatalf("Check(%d) = %v, want an error: %v", need, err, wantErr)
		}
		if asked != wantAsked {
			t.Fatalf("Check(%d): statfs asked %d times, want %d", need, asked, wantAsked)
		}
	}
	check(300<<10, 1, false) // the first check asks
	check(300<<10, 1, false) // 424 KiB left above the reserve
	check(500<<10, 1, true)  // 424 KiB < 500 KiB: refused without asking
	check(100<<10, 2, false) // short: it asks again
	free = reserve + 8<<20
	check(spaceAhead/2-50<<10, 3, false) // spaceAhead/2 checked since: it asks again
	free = reserve                       // someone filled the disk
	check(1, 3, false)
	time.Sleep(spaceFresh + 10*time.Millisecond)
	check(1, 4, true) // the answer got old: asked again
	free = reserve + 1<<20
	if err := g.check(0, true); err != nil || asked != 5 {
		t.Fatalf("a forced check: %v, statfs asked %d times, want 5", err, asked)
	}
}
