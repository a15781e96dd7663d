package capture

import "testing"

// BenchmarkReadFields compares the pass over the members with gjson's
// reading on the typical payloads.
func BenchmarkReadFields(b *testing.B) {
	p := typicalPayloads()
	for _, name := range []string{"result-4k", "result-20k"} {
		resp := p[name]
		b.Run(name+"/members", func(b *testing.B) {
			for b.Loop() {
				readResponseFast(resp)
			}
		})
		b.Run(name+"/gjson", func(b *testing.B) {
			for b.Loop() {
				readResponseGJSON(resp)
			}
		})
	}
	req := p["call-small"]
	b.Run("call-small/members", func(b *testing.B) {
		for b.Loop() {
			readRequestFast(req, "tools/call")
		}
	})
	b.Run("call-small/gjson", func(b *testing.B) {
		for b.Loop() {
			readRequestGJSON(req, "tools/call")
		}
	})
}
