package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestBatchBody checks the batch body's bytes, its length and a second
// reading through GetBody against the buffer it replaced.
func TestBatchBody(t *testing.T) {
	for _, steps := range [][]json.RawMessage{
		nil,
		{json.RawMessage(`{"seq":1}`)},
		{json.RawMessage(`{"seq":1}`), json.RawMessage(`{"seq":2,"x":"y"}`), json.RawMessage(`{}`)},
	} {
		want := []byte(`{"steps":[`)
		for i, s := range steps {
			if i > 0 {
				want = append(want, ',')
			}
			want = append(want, s...)
		}
		want = append(want, "]}"...)
		body := newBatchBody(steps)
		req, err := http.NewRequest(http.MethodPost, "http://hindsight/v1/steps", body)
		if err != nil {
			t.Fatal(err)
		}
		body.request(req)
		got, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) || req.ContentLength != int64(len(want)) {
			t.Errorf("body %s (length %d), want %s (%d)", got, req.ContentLength, want, len(want))
		}
		again, err := req.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(again); string(got) != string(want) {
			t.Errorf("GetBody read %s, want %s", got, want)
		}
		var v struct{ Steps []json.RawMessage }
		if err := json.Unmarshal(got, &v); err != nil || len(v.Steps) != len(steps) {
			t.Errorf("body %s: %d steps, err %v", got, len(v.Steps), err)
		}
	}
}
