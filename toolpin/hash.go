package toolpin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode"

	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/tidwall/gjson"
)

// Digest is what pinning keeps of one tool as listed.
type Digest struct {
	Name        string
	Hash        string // hex SHA-256 of the canonical JSON of name, description, inputSchema
	Description string // as listed
	Flag        string // why the description fails validation (Inspect); "" when it passes
}

// DigestTool reads one tool of a tools/list result (its raw JSON). The
// hash covers the name, the description and the input schema, each
// decoded and encoded again with object keys sorted and numbers as they
// were written, so white space and member order change nothing; any other
// member (annotations, icons, _meta) is not pinned.
func DigestTool(raw []byte) (Digest, error) {
	d, title, err := hashTool(raw)
	if err != nil {
		return Digest{}, err
	}
	d.Flag = Inspect(d.Description, title)
	return d, nil
}

// hashTool is DigestTool without Inspect, which costs most of it: it
// returns the tool's title beside, for Inspect.
func hashTool(raw []byte) (d Digest, title string, err error) {
	r := gjson.ParseBytes(raw)
	if !r.IsObject() {
		return Digest{}, "", fmt.Errorf("digest tool: not an object")
	}
	name := r.Get("name")
	if name.Type != gjson.String {
		return Digest{}, "", fmt.Errorf("digest tool: no name")
	}
	def := map[string]any{"name": name.Str, "description": nil, "inputSchema": nil}
	for _, k := range []string{"description", "inputSchema"} {
		if v := r.Get(k); v.Exists() {
			dec := json.NewDecoder(bytes.NewReader([]byte(v.Raw)))
			dec.UseNumber()
			var x any
			if err := dec.Decode(&x); err != nil {
				return Digest{}, "", fmt.Errorf("digest tool %s: %w", name.Str, err)
			}
			def[k] = x
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(def); err != nil {
		return Digest{}, "", fmt.Errorf("digest tool %s: %w", name.Str, err)
	}
	sum := sha256.Sum256(bytes.TrimSpace(buf.Bytes()))
	return Digest{Name: name.Str, Hash: hex.EncodeToString(sum[:]), Description: r.Get("description").String()},
		r.Get("title").String(), nil
}

// Inspect returns why a tool's description (or title) reads as hidden
// instructions, or "": characters no reader sees (format characters such
// as zero-width spaces, bidirectional controls and tag characters, and
// control characters but tab and line breaks; a zero-width joiner, which
// emoji use, is allowed), or text that fails guard.Check.
func Inspect(texts ...string) string {
	for _, t := range texts {
		for _, r := range t {
			if r == '\t' || r == '\n' || r == '\r' || r == 0x200D {
				continue
			}
			if unicode.Is(unicode.Cf, r) || unicode.IsControl(r) {
				return fmt.Sprintf("hidden_characters: U+%04X", r)
			}
		}
		if f := guard.Check(t); f != nil {
			return f.Detail()
		}
	}
	return ""
}
