package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a&b>", "\x00\x1f\"\\", "\u2028\u2029", "bad\xff\xfe", "é漢字🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal: %s", s, got, want)
		}
	})
}

// TestAppendPlainString: the escapes AppendPlainString writes where it
// differs from AppendString.
func TestAppendPlainString(t *testing.T) {
	for in, want := range map[string]string{
		"":                   `""`,
		"<a & b>":            `"<a & b>"`,
		"\b\f\n\r\t\x00\x1f": `"\u0008\u000c\n\r\t\u0000\u001f"`,
		"\x7f\"\\":           `"\u007f\"\\"`,
		"\u2028\u2029é":      `"\u2028\u2029é"`,
		"bad\xff\xfe":        `"bad\ufffd\ufffd"`,
	} {
		if got := string(AppendPlainString(nil, in)); got != want {
			t.Errorf("AppendPlainString(%q) = %s; want %s", in, got, want)
		}
	}
}

// FuzzAppendPlainString: AppendPlainString writes a JSON string that
// decodes to what AppendString's does, without HTML escapes.
func FuzzAppendPlainString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a&b>", "\x00\x1f\"\\\x7f", "\u2028\u2029", "bad\xff\xfe", "é漢字🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendPlainString(nil, s)
		var a, b string
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("AppendPlainString(%q) = %s: %v", s, got, err)
		}
		if err := json.Unmarshal(AppendString(nil, s), &b); err != nil || a != b {
			t.Fatalf("AppendPlainString(%q) decodes to %q, AppendString's to %q (%v)", s, a, b, err)
		}
		if strings.Contains(string(got), `\u003c`) || strings.Contains(string(got), `\u0026`) {
			t.Fatalf("AppendPlainString(%q) = %s escapes HTML", s, got)
		}
	})
}

// TestAppendTime: AppendTime writes what json.Marshal writes for a time,
// and fails where it fails.
func TestAppendTime(t *testing.T) {
	for _, tm := range []time.Time{{}, time.Date(2026, 11, 30, 9, 0, 0, 123, time.FixedZone("", -3600)), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		want, wantErr := json.Marshal(tm)
		got, err := AppendTime(nil, tm)
		if (err == nil) != (wantErr == nil) || err == nil && string(got) != string(want) {
			t.Errorf("AppendTime(%v) = %s, %v; json.Marshal: %s, %v", tm, got, err, want, wantErr)
		}
	}
}
