package spool

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// TestListAndStats: List shows a live spool as live with the stats its
// sidecar wrote, an outbox nobody holds as dead, and skips what is set
// aside or being created.
func TestListAndStats(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	o, err := Open(Options{Home: home, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteStats(home, o.ID(), Stats{Server: "fs", PID: 7, Depth: 3}); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(home.Outboxes(), "20260101T000000.000000-1-deadbeef")
	for _, d := range []string{dead, filepath.Join(home.Outboxes(), corruptDir, "x"), filepath.Join(home.Outboxes(), ".y.new")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dead, lockName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	obs := List(home)
	if len(obs) != 2 || obs[0].Name != filepath.Base(dead) || obs[0].Live || obs[0].Stats != nil ||
		obs[1].Name != o.ID() || !obs[1].Live || obs[1].Stats == nil || obs[1].Stats.Server != "fs" || obs[1].Stats.Depth != 3 {
		t.Fatalf("List = %+v", obs)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if obs := List(home); len(obs) != 1 || obs[0].Name != filepath.Base(dead) {
		t.Fatalf("after Close: %+v", obs)
	}
	if err := WriteStats(home, o.ID(), Stats{}); err == nil {
		t.Error("stats written into a removed outbox")
	}
}
