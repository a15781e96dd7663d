package replay

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// live serves steps as a live server and returns a started mcp-go client
// of it.
func live(t *testing.T, steps []hindsight.Step) *client.Client {
	t.Helper()
	rec, err := New(steps, "demo")
	if err != nil {
		t.Fatal(err)
	}
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_ = NewServer(rec, MatchExact).ServeStdio(ctx, sr, sw)
		sw.Close()
	}()
	c := client.NewClient(transport.NewIO(cr, cw, io.NopCloser(nil)))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); cancel(); cw.Close() })
	return c
}

func TestVerify(t *testing.T) {
	rec, err := New(corpus(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	changed := corpus()
	changed[3].Result = json.RawMessage(`{"content":[{"type":"text","text":"echo: CHANGED"}]}`)
	changed[5].Result = json.RawMessage(`{"content":[{"type":"text","text":"not found: 404"}],"isError":false}`)

	tests := []struct {
		name  string
		steps []hindsight.Step
		opt   VerifyOptions
		want  map[int]string // step → status
		diffs map[int]string // step → the field that differs
	}{
		{"same server, reads only", corpus(), VerifyOptions{},
			map[int]string{2: StatusSame, 3: StatusSame, 4: StatusNotReplayable, 5: StatusSkipped, 7: StatusNotReplayable, 8: StatusSkipped}, nil},
		{"same server, writes allowed", corpus(), VerifyOptions{AllowWrites: true},
			map[int]string{2: StatusSame, 3: StatusSame, 4: StatusNotReplayable, 5: StatusSame, 7: StatusNotReplayable, 8: StatusSame}, nil},
		{"changed server", changed, VerifyOptions{AllowWrites: true},
			map[int]string{2: StatusSame, 3: StatusDifferent, 5: StatusDifferent, 8: StatusSame},
			map[int]string{3: "content", 5: "is_error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Verify(context.Background(), rec, live(t, tt.steps), tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range rep.Steps {
				if want, ok := tt.want[s.Step]; ok && s.Status != want {
					t.Errorf("step %d (%s): %s (%s %+v), want %s", s.Step, s.Tool, s.Status, s.Reason, s.Diffs, want)
				}
				if f, ok := tt.diffs[s.Step]; ok && (len(s.Diffs) != 1 || s.Diffs[0].Field != f) {
					t.Errorf("step %d diffs %+v, want one in %s", s.Step, s.Diffs, f)
				}
			}
			if rep.OK() != (len(tt.diffs) == 0) {
				t.Errorf("OK() = %v: %s", rep.OK(), rep.Summary())
			}
		})
	}
}

func TestCompareIgnores(t *testing.T) {
	call := &Call{Result: json.RawMessage(`{"content":[{"type":"text","text":"at 2026-01-02T03:04:05Z id 123e4567-e89b-12d3-a456-426614174000"}],"structuredContent":{"id":1,"v":"x"}}`)}
	liveRes := json.RawMessage(`{"content":[{"type":"text","text":"at 2026-12-01T20:00:00.123+01:00 id 00000000-e89b-12d3-a456-426614174999"}],"structuredContent":{"v":"x","id":2}}`)
	resp := &transport.JSONRPCResponse{Result: liveRes}
	if d := compare(call, resp, VerifyOptions{Ignore: []string{"structuredContent.id"}}); len(d) != 0 {
		t.Errorf("diffs %+v, want none", d)
	}
	if d := compare(call, resp, VerifyOptions{}); len(d) != 1 || d[0].Field != "structured_content" {
		t.Errorf("without ignore: diffs %+v", d)
	}
	if d := compare(call, resp, VerifyOptions{KeepVolatile: true, Ignore: []string{"structuredContent"}}); len(d) != 1 || d[0].Field != "content" {
		t.Errorf("volatile kept: diffs %+v", d)
	}
}
