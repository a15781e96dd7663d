package llm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The built-in prompt is embedded from reflect/llm/prompt.tmpl; users read and
// replace configs/reflect-prompt.tmpl. The two must be the same text.
func TestPromptCopyMatches(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "reflect-prompt.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != DefaultPrompt {
		t.Fatal("configs/reflect-prompt.tmpl differs from reflect/llm/prompt.tmpl: copy one over the other")
	}
}

func TestLoadPrompt(t *testing.T) {
	if _, err := LoadPrompt(""); err != nil {
		t.Fatalf("built-in prompt: %v", err)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := LoadPrompt(write("nouser.tmpl", `{{define "system"}}x{{end}}`)); err == nil || !strings.Contains(err.Error(), `"user"`) {
		t.Errorf("template without user block: err = %v", err)
	}
	if _, err := LoadPrompt(write("bad.tmpl", `{{define "user"}}{{.Trajectory}`)); err == nil {
		t.Error("unparsable template accepted")
	}
	if _, err := LoadPrompt(filepath.Join(dir, "missing.tmpl")); err == nil {
		t.Error("missing file accepted")
	}
	tm, err := LoadPrompt(write("ok.tmpl", `{{define "user"}}steps: {{.Trajectory}}{{end}}`))
	if err != nil || tm.Lookup("system") != nil {
		t.Fatalf("user-only template: %v", err)
	}
}
