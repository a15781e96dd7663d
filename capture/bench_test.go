package capture

import (
	"fmt"
	"strings"
	"testing"
)

// typicalPayloads are tools/call traffic of the sizes agents produce: a
// small call, a file read, and a large search result.
func typicalPayloads() map[string][]byte {
	var lines []string
	for i := 0; i < 200; i++ {
		lines = append(lines, fmt.Sprintf("src/pkg%d/file%d.go:%d: func Handle%d(ctx context.Context, req *Request) error { return nil }", i%7, i, i*3, i))
	}
	big := strings.Join(lines, "\n")
	return map[string][]byte{
		"call-small": []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/work/project/README.md"},"_meta":{"progressToken":7}}}`),
		"result-4k":  []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":` + quote(big[:4000]) + `}],"isError":false}}`),
		"result-20k": []byte(`{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":` + quote(big) + `}],"structuredContent":{"matches":200,"truncated":false}}}`),
	}
}

func quote(s string) string { return string(appendJSONString(nil, s)) }

// BenchmarkRedact measures the redactor on typical payloads against a
// baseline in the same run: json.Valid over the same bytes (the least any
// JSON-aware pass must do).
func BenchmarkRedact(b *testing.B) {
	r := testRedactor(b)
	for name, p := range typicalPayloads() {
		b.Run(name+"/redact", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				r.Redact(p)
			}
		})
		b.Run(name+"/gitleaks-only", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				r.detector.DetectString(string(p))
			}
		})
	}
}
