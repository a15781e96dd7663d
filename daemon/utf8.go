package daemon

import (
	"bytes"
	"unicode/utf8"
)

// validUTF8 returns b with each run of invalid UTF-8 replaced by U+FFFD (b
// itself when it is valid). The daemon's answers and exports pass through
// it: a step stored by a sidecar that did not replace invalid bytes (older
// ones relayed them into request and response as they came) still comes
// out as valid UTF-8 JSON, since such bytes can only sit inside strings.
func validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return bytes.ToValidUTF8(b, []byte("\uFFFD"))
}
