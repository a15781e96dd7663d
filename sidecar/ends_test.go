package sidecar

import (
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/tidwall/gjson"
)

// TestSaysFinal holds saysFinal's shortcut to the plain parse, on requests
// that write the key plainly, with escapes JSON allows, and not at all.
func TestSaysFinal(t *testing.T) {
	if !strings.Contains(inject.FinalMetaKey, string(finalKeyName)) {
		t.Fatalf("FinalMetaKey %q does not hold %q", inject.FinalMetaKey, finalKeyName)
	}
	for _, c := range []struct {
		req  string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.hindsight/final":true}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.hindsight\/final":true}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.h\u0069ndsight/final":true}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.hindsight/final":false}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.hindsight/task":"t"}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"t":"\u00e9"}}}`, false},
	} {
		plain := gjson.Get(c.req, finalMetaPath).Type == gjson.True
		if got := saysFinal([]byte(c.req)); got != c.want || plain != c.want {
			t.Errorf("saysFinal(%s) = %v, plain parse %v, want %v", c.req, got, plain, c.want)
		}
	}
}

func FuzzSaysFinal(f *testing.F) {
	f.Add(`{"params":{"_meta":{"io.hindsight/final":true}}}`)
	f.Add(`{"params":{"_meta":{"io.h\u0069ndsight\/final":true}}}`)
	f.Fuzz(func(t *testing.T, req string) {
		if got, want := saysFinal([]byte(req)), gjson.Get(req, finalMetaPath).Type == gjson.True; got != want {
			t.Fatalf("saysFinal(%q) = %v, the plain parse says %v", req, got, want)
		}
	})
}
