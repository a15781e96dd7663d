package inject

import (
	"strings"
	"testing"
)

func TestTruncateTokens(t *testing.T) {
	tests := []struct {
		in  string
		max int
	}{
		{"short", 200},
		{strings.Repeat("word ", 500), 200},
		{strings.Repeat("日本語のテキスト", 300), 37},
		{strings.Repeat("🙂", 300), 5},
		{strings.Repeat("x", 10), 0},
	}
	for _, tt := range tests {
		out := TruncateTokens(tt.in, tt.max)
		if n := CountTokens(out); n > tt.max {
			t.Errorf("TruncateTokens(%.20q, %d) has %d tokens", tt.in, tt.max, n)
		}
		if !strings.HasPrefix(tt.in, strings.TrimSuffix(out, ellipsis)) && out != "" {
			t.Errorf("TruncateTokens(%.20q) = %.40q is not a prefix", tt.in, out)
		}
		if CountTokens(tt.in) > tt.max && tt.max > 2 && !strings.HasSuffix(out, ellipsis) {
			t.Errorf("cut text not marked: %.40q", out)
		}
	}
}
