package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCaptureEnabled(t *testing.T) {
	for _, tc := range []struct {
		name, file, env string
		want, queueOnly bool
	}{
		{"default", "", "", true, false},
		{"file-false", "capture:\n  enabled: false\n", "", false, false},
		{"file-true", "capture:\n  enabled: true\n", "", true, false},
		{"env-off", "", "off", false, false},
		{"env-OFF-spaces", "", " OFF ", false, false},
		{"env-0", "capture:\n  enabled: true\n", "0", false, false},
		{"env-on-beats-file", "capture:\n  enabled: false\n", "on", true, false},
		{"env-garbage-ignored", "capture:\n  enabled: false\n", "maybe", false, false},
		{"env-queue-beats-file", "capture:\n  enabled: false\n", " Queue", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HINDSIGHT_CAPTURE", tc.env)
			path := ""
			if tc.file != "" {
				path = filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := loadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.captureEnabled(); got != tc.want {
				t.Errorf("captureEnabled() = %v, want %v", got, tc.want)
			}
			if cfg.Capture.QueueOnly != tc.queueOnly {
				t.Errorf("QueueOnly = %v, want %v", cfg.Capture.QueueOnly, tc.queueOnly)
			}
		})
	}
}
