package safelog

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestRedactArgv(t *testing.T) {
	const r = argvPlaceholder
	tests := []struct {
		name      string
		argv, out []string
	}{
		{"flag then value", []string{"server", "--api-key", "plainvalue1", "--port", "8080"}, []string{"server", "--api-key", r, "--port", "8080"}},
		{"flag=value", []string{"server", "--token=abc", "--verbose"}, []string{"server", "--token=" + r, "--verbose"}},
		{"single dash", []string{"server", "-password", "hunter2"}, []string{"server", "-password", r}},
		{"auth prefix", []string{"s", "--auth-header", "Bearer x", "--authorization=y"}, []string{"s", "--auth-header", r, "--authorization=" + r}},
		{"credential, secret, underscores", []string{"s", "--client_secret", "x", "--credentials-file=/x", "--db.password", "p"}, []string{"s", "--client_secret", r, "--credentials-file=" + r, "--db.password", r}},
		{"env style", []string{"env", "GITHUB_TOKEN=ghp_plain", "OPENAI_API_KEY=k", "PATH=/bin", "node", "s.js"}, []string{"env", "GITHUB_TOKEN=" + r, "OPENAI_API_KEY=" + r, "PATH=/bin", "node", "s.js"}},
		{"flag without value at the end", []string{"s", "--token"}, []string{"s", "--token"}},
		{"flag followed by a flag", []string{"s", "--token", "--port", "1"}, []string{"s", "--token", "--port", "1"}},
		{"names that only contain the words", []string{"s", "--keyboard", "us", "--monkey", "x", "--path", "/p", "--tokens-max", "5"}, []string{"s", "--keyboard", "us", "--monkey", "x", "--path", "/p", "--tokens-max", "5"}},
		{"not a variable", []string{"s", "a b=c", "x=token=y"}, []string{"s", "a b=c", "x=token=y"}},
		{"after --", []string{"--", "--api-key", "v"}, []string{"--", "--api-key", r}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.argv)
			if got := RedactArgv(in); !slices.Equal(got, tt.out) {
				t.Errorf("RedactArgv(%q) = %q, want %q", tt.argv, got, tt.out)
			}
			if !slices.Equal(in, tt.argv) {
				t.Errorf("RedactArgv changed its argument: %q", in)
			}
		})
	}
}

// TestHandlerRedactsCommandLines: a command line logged as a []string
// attribute loses the values of its secret-named flags, whatever they look
// like, with the value redactor still applied to the rest.
func TestHandlerRedactsCommandLines(t *testing.T) {
	var buf bytes.Buffer
	h := NewHandler(slog.NewJSONHandler(&buf, nil), upperRedactor{}, Options{})
	slog.New(h).Info("wrap starting", "command", []string{"server", "--api-key", "lowercase-value", "SECRETWORD"})
	out := buf.String()
	if strings.Contains(out, "lowercase-value") {
		t.Errorf("a secret flag's value was logged: %s", out)
	}
	if !strings.Contains(out, argvPlaceholder) || !strings.Contains(out, "[X]") {
		t.Errorf("log %s lacks the flag placeholder or the value redactor's", out)
	}
}

// upperRedactor stands in for capture's redactor: it replaces the word
// SECRETWORD.
type upperRedactor struct{}

func (upperRedactor) RedactString(s string) (string, int) {
	n := strings.Count(s, "SECRETWORD")
	return strings.ReplaceAll(s, "SECRETWORD", "[X]"), n
}
