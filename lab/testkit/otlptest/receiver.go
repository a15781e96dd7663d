// Package otlptest is an in-process OTLP trace collector for tests.
package otlptest

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Receiver is an in-process OTLP collector: it keeps every span it is sent,
// with its resource's service.name.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // service.name of each span's resource
	requests int
}

func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	for _, rs := range req.ResourceSpans {
		svc := Attr(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				r.spans = append(r.spans, sp)
				r.services = append(r.services, svc)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Received returns the spans so far and their services.
func (r *Receiver) Received() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]string(nil), r.services...)
}

// ListenHTTP receives OTLP/HTTP protobuf at /v1/traces and returns the
// collector's base URL.
func (r *Receiver) ListenHTTP(t testing.TB) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var in coltracepb.ExportTraceServiceRequest
		if req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &in) != nil {
			http.Error(w, "want an OTLP protobuf body", http.StatusUnsupportedMediaType)
			return
		}
		out, _ := r.Export(req.Context(), &in)
		b, _ = proto.Marshal(out)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// ListenGRPC receives OTLP/gRPC and returns the collector's URL.
func (r *Receiver) ListenGRPC(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return "http://" + ln.Addr().String()
}

// Attr is the string value of key among attrs, "" when absent.
func Attr(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.Key == key {
			if s, ok := kv.Value.GetValue().(*commonpb.AnyValue_StringValue); ok {
				return s.StringValue
			}
			if b, ok := kv.Value.GetValue().(*commonpb.AnyValue_BoolValue); ok && b.BoolValue {
				return "true"
			}
			return kv.Value.String()
		}
	}
	return ""
}
