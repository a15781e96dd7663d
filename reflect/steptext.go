package reflect

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/hindsight-proxy/hindsight"
)

// containsToken reports whether v occurs in s as a whole token: not inside
// a longer run of letters and digits.
func containsToken(s, v string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], v)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(v)
		if (start == 0 || !isAlnum(s[start-1])) && (end == len(s) || !isAlnum(s[end])) {
			return true
		}
		i = start + 1
	}
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// mentions reports whether the error text names word (an argument name),
// as a word.
func mentions(errText, word string) bool {
	if len(word) < 2 {
		return false
	}
	low, w := strings.ToLower(errText), strings.ToLower(word)
	for i := strings.Index(low, w); i >= 0; {
		end := i + len(w)
		if (i == 0 || !isWordByte(low[i-1])) && (end == len(low) || !isWordByte(low[end])) {
			return true
		}
		j := strings.Index(low[i+1:], w)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9'
}

// namesTool reports whether an error text points to tool by its name:
// the name itself ("call auth_refresh"), or its parts next to each other
// ("auth refresh", "create-branch"). Its parts scattered through the text
// ("could not create the branch") are shared words, not a pointer.
func namesTool(errText, tool string) bool {
	if mentions(errText, tool) {
		return true
	}
	parts := strings.FieldsFunc(strings.ToLower(tool), func(r rune) bool { return r == '_' || r == '-' || r == '.' })
	if len(parts) < 2 {
		return false
	}
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`\b` + strings.Join(parts, `[\s_.-]`) + `\b`).MatchString(strings.ToLower(errText))
}

// callResult is what reflection reads of a CallToolResult.
type callResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Structured json.RawMessage `json:"structuredContent"`
}

// substantial reports whether a successful step's result carries data:
// anything but an empty or one-word acknowledgement ("ok", "noted").
func substantial(s *hindsight.Step) bool {
	var r callResult
	if json.Unmarshal(s.Result, &r) != nil {
		return len(bytes.TrimSpace(s.Result)) > 4
	}
	if len(r.Structured) > 0 && string(r.Structured) != "null" && string(r.Structured) != "{}" {
		return true
	}
	for _, c := range r.Content {
		if c.Type != "text" {
			return true
		}
		t := strings.ToLower(strings.Trim(strings.TrimSpace(c.Text), ".!"))
		switch t {
		case "", "ok", "okay", "done", "noted", "acknowledged", "success", "true", "{}", "[]", "null":
		default:
			return true
		}
	}
	return false
}

// errorText is the error message of a failed step: the JSON-RPC error's, or
// the text of an isError result.
func errorText(s *hindsight.Step) string {
	if s.Error != nil && s.Error.Message != "" {
		return s.Error.Message
	}
	if t := firstText(s); t != "" {
		return t
	}
	if s.CausalTag == hindsight.TagTimeout {
		return "timed out"
	}
	return "error"
}

// firstText is the first text item of a step's result, on one line.
func firstText(s *hindsight.Step) string {
	var r callResult
	if json.Unmarshal(s.Result, &r) == nil {
		for _, c := range r.Content {
			if c.Text != "" {
				return strings.Join(strings.Fields(c.Text), " ")
			}
		}
	}
	return ""
}

// foundText is what a successful step's result says, for finding a
// value in it: its text items and structured content as read (JSON
// string escapes undone, so "\npayments-prod" is the token
// payments-prod), or the raw result when it is no CallToolResult.
func foundText(s *hindsight.Step) string {
	var r callResult
	if json.Unmarshal(s.Result, &r) != nil || len(r.Content) == 0 && len(r.Structured) == 0 {
		return string(s.Result)
	}
	parts := []string{string(r.Structured)}
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
