package otlp

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestParentOf(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name, request string
		valid         bool
		state         string
	}{
		{"traceparent and tracestate", `{"params":{"_meta":{"traceparent":"` + tp + `","tracestate":"rojo=00f067aa0ba902b7"}}}`, true, "rojo=00f067aa0ba902b7"},
		{"traceparent only", `{"params":{"_meta":{"traceparent":"` + tp + `"}}}`, true, ""},
		{"no _meta", `{"params":{"name":"x"}}`, false, ""},
		{"not a string", `{"params":{"_meta":{"traceparent":42}}}`, false, ""},
		{"zero trace id", `{"params":{"_meta":{"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}}`, false, ""},
		{"short", `{"params":{"_meta":{"traceparent":"00-4bf92f35-00f067aa0ba902b7-01"}}}`, false, ""},
		{"outside _meta", `{"params":{"traceparent":"` + tp + `"}}`, false, ""},
		{"not JSON", `traceparent ` + tp, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := parentOf([]byte(tc.request))
			if sc.IsValid() != tc.valid {
				t.Fatalf("valid %v, want %v", sc.IsValid(), tc.valid)
			}
			if !tc.valid {
				return
			}
			if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() || !sc.IsRemote() {
				t.Errorf("parent %v", sc)
			}
			if sc.TraceState().String() != tc.state {
				t.Errorf("tracestate %q, want %q", sc.TraceState().String(), tc.state)
			}
		})
	}
}

// FuzzParentOf feeds any traceparent and tracestate, and any request
// bytes, to the extraction: it must not panic, and a parent it accepts
// must be the one the traceparent names, remote, and survive a round trip
// through the W3C propagator.
func FuzzParentOf(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "rojo=00f067aa0ba902b7", []byte(`{}`))
	f.Add("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00", "", []byte(`{"params":{"_meta":{"traceparent":"x"}}}`))
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=b,,c=d", []byte(`{"params":`))
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-extra", "k=\x00", []byte(`[]`))
	f.Fuzz(func(t *testing.T, traceparent, tracestate string, raw []byte) {
		parentOf(raw) // any bytes: no panic
		req := `{"params":{"_meta":{"traceparent":` + strconv.Quote(traceparent) + `,"tracestate":` + strconv.Quote(tracestate) + `}}}`
		sc := parentOf([]byte(req))
		if !sc.IsValid() {
			return
		}
		if !sc.IsRemote() {
			t.Fatal("an extracted parent is not remote")
		}
		if lower := strings.ToLower(traceparent); !strings.Contains(lower, sc.TraceID().String()) || !strings.Contains(lower, sc.SpanID().String()) {
			t.Fatalf("parent %s/%s is not in traceparent %q", sc.TraceID(), sc.SpanID(), traceparent)
		}
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), carrier)
		again := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
		if !again.Equal(sc) {
			t.Fatalf("round trip: %v became %v", sc, again)
		}
	})
}
