package wire

import (
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// BenchmarkAppendStep measures encoding a step as capture builds it, whole
// and compact, and decoding it back as the daemon reads stored steps.
func BenchmarkAppendStep(b *testing.B) {
	s := compactStep("bench", 1, 0)
	buf := make([]byte, 0, 4096)
	for name, enc := range map[string]func([]byte, *hindsight.Step) ([]byte, error){"full": AppendStep, "compact": AppendCompactStep} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = enc(buf[:0], &s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// compact-slices: the arguments and result are slices of the request
	// and response, as capture builds them.
	b.Run("compact-slices", func(b *testing.B) {
		c := s
		c.Arguments, c.Result = RequestArguments(c.Method, c.Request), ResponseResult(c.Response)
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if buf, err = AppendCompactStep(buf[:0], &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		raw, err := AppendStep(nil, &s)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			var d hindsight.Step
			if err := DecodeStep(raw, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
