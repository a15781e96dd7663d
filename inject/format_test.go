package inject

import "testing"

// TestOneLineStripsControls: escape sequences, control characters and
// bidirectional overrides never reach an agent.
func TestOneLineStripsControls(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Call login\x1b[31m first\x1b[0m.", "Call login first."},
		{"a\x1b]0;title\x07b", "ab"},
		{"x\u202Egnp.exe\u202C y", "xgnp.exe y"},
		{"tab\there\nnew\x00line\x7f", "tab here newline"},
		{"plain text stays", "plain text stays"},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
