package capture

import (
	"encoding/base64"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// normalizeKey lower-cases a key name and drops separators, so that
// "API-Key", "api_key" and "apiKey" are one name.
func normalizeKey(k string) string {
	i := 0
	for i < len(k) && ('a' <= k[i] && k[i] <= 'z' || '0' <= k[i] && k[i] <= '9') {
		i++
	}
	if i == len(k) {
		return k // already normal, as most keys are: no copy
	}
	var b strings.Builder
	b.Grow(len(k))
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '-' || c == '_' || c == '.' || c == ' ' || c == '$' || c == '@':
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// sensitiveExact are normalised key names that are secret only as a whole.
var sensitiveExact = map[string]bool{
	"auth": true, "pass": true, "pwd": true, "session": true, "sid": true,
	"jwt": true, "otp": true, "pin": true, "cvv": true, "ssn": true,
	"dsn": true, "connectionstring": true, "databaseurl": true,
}

// sensitiveSuffixes are normalised endings of secret key names, longest
// first so the placeholder names the most specific one.
var sensitiveSuffixes = []string{
	"secretaccesskey", "clientsecret", "refreshtoken", "accesstoken", "privatekey",
	"passphrase", "credentials", "authorization", "sessionid", "setcookie",
	"passwords", "password", "passwd", "secretkey", "accesskey", "credential",
	"secrets", "secret", "apikey", "cookies", "cookie", "token",
}

// notSensitive are names that end like secrets but are protocol plumbing
// (MCP progress tokens, pagination cursors).
var notSensitive = map[string]bool{
	"progresstoken": true, "pagetoken": true, "nextpagetoken": true, "prevpagetoken": true,
	"previouspagetoken": true, "nexttoken": true, "continuationtoken": true, "cursor": true,
	"nextcursor": true, "tokentype": true, "tokens": true,
}

// sensitiveEnds has a bit for the last two bytes of every sensitive name:
// most keys end otherwise and are ruled out without a map lookup.
var sensitiveEnds = func() (f [1 << 10]uint64) {
	for _, names := range [][]string{slices.Collect(maps.Keys(sensitiveExact)), sensitiveSuffixes} {
		for _, n := range names {
			setBit(&f, uint32(n[len(n)-2])<<8|uint32(n[len(n)-1]))
		}
	}
	return f
}()

func hasBit(f *[1 << 10]uint64, b uint32) bool { return f[b>>6&1023]&(1<<(b&63)) != 0 }

// canonicalKey names the sensitive part of a normalised key ("dbpassword"
// → "password"), for placeholders.
func canonicalKey(n string) string {
	if part, ok := sensitivePart(n); ok {
		return part
	}
	return n
}

func builtinSensitive(n string) bool {
	if len(n) < 3 || !hasBit(&sensitiveEnds, uint32(n[len(n)-2])<<8|uint32(n[len(n)-1])) || notSensitive[n] {
		return false
	}
	_, ok := sensitivePart(n)
	return ok
}

// sensitivePart returns the sensitive part of the normalised key n: n
// when it is a sensitive name, else the sensitive suffix it ends with;
// false when it has none.
func sensitivePart(n string) (string, bool) {
	if sensitiveExact[n] {
		return n, true
	}
	for _, s := range sensitiveSuffixes {
		if strings.HasSuffix(n, s) {
			return s, true
		}
	}
	return "", false
}

// sensitiveKey returns the rule id for the value of key, or "".
func (r *Redactor) sensitiveKey(key string) string {
	if key == "" || len(key) > 64 {
		return ""
	}
	n := normalizeKey(key)
	if id, ok := r.keys[n]; ok {
		return id
	}
	if builtinSensitive(n) {
		return "key:" + canonicalKey(n)
	}
	return ""
}

// builtinText are the text rules run after gitleaks, in order.
var builtinText = []textRule{
	{
		// PEM private keys, whole or cut short (no END line).
		id:       "private-key",
		keywords: []string{"private key"},
		re:       regexp.MustCompile(`-----BEGIN[ A-Z0-9_-]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[ A-Z0-9_-]{0,40}PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s\\:,-]*)`),
	},
	{
		id:       "jwt",
		keywords: []string{"eyj"},
		re:       regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`),
	},
	{
		// user:password@ in URLs (database DSNs, git remotes, proxies).
		id:       "url-password",
		keywords: []string{"://"},
		re:       regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s/:@"'<>\\]*:([^\s/@"'<>\\]+)@`),
	},
	{
		id:       "authorization",
		keywords: []string{"authorization"},
		re:       regexp.MustCompile(`(?i)\b(?:proxy-)?authorization(?:\\*["'])?\s*[:=]\s*(?:\\*["'])?(?:(?:bearer|token|basic|digest|apikey|sso-key|dpop)\s+)?([^\s"',;\\]{6,})`),
	},
	{
		id:       "bearer",
		keywords: []string{"bearer"},
		re:       regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)`),
	},
	{
		id:       "basic-auth",
		keywords: []string{"basic"},
		re:       regexp.MustCompile(`(?i)\bbasic\s+([A-Za-z0-9+/]{8,}={0,2})`),
		check:    basicCredentials,
	},
	{
		id:       "key:cookie",
		keywords: []string{"cookie"},
		re:       regexp.MustCompile(`(?i)\b(?:set-)?cookie(?:\\*["'])?\s*:\s*(?:\\*["'])?([^\r\n"'\\]{4,})`),
		parts:    cookieValues,
	},
	{
		// OpenAI keys without the "T3BlbkFJ" marker gitleaks' rule needs:
		// project, service-account and admin keys (sk-proj-…, 150 to 170
		// bytes today), and the bare sk-… keys of OpenAI-compatible
		// services (32 to 64 letters and digits). A key is random: its
		// body has upper and lower case letters and digits, which hyphenated
		// words ("sk-learn", "task-force-one") do not.
		id:       "openai-api-key",
		keywords: []string{"sk-"},
		re:       regexp.MustCompile(`\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{32,})`),
		check:    func(_, v string) bool { return randomLooking(v[strings.LastIndexByte(v[:min(len(v), 12)], '-')+1:]) },
	},
	{
		// ADO/ODBC connection strings: ";Pwd=…;".
		id:       "key:password",
		keywords: []string{"pwd"},
		re:       regexp.MustCompile(`(?i)(?:^|[;\s])pwd\s*=\s*([^;"'\s\\]+)`),
	},
	{
		// key=value and "key": "value" in text, with a sensitive key.
		id:         "key:secret",
		keywords:   []string{"pass", "secret", "token", "key", "auth", "session"},
		re:         regexp.MustCompile(`(?i)(password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|session[_-]?id|auth)\b(?:\\*["'])?\s*[:=]\s*(?:\\*["'])?([^\s"'&,;<>{}\[\]\\]{3,})`),
		keyGroup:   1,
		valueGroup: 2,
		check:      func(key, v string) bool { return !notSensitive[normalizeKey(key)] && !isReference(v) },
	},
}

// randomLooking reports whether s holds an upper-case letter, a
// lower-case letter and a digit, as a random key of 32 bytes or more does.
func randomLooking(s string) bool {
	var upper, lower, digit bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		upper = upper || 'A' <= c && c <= 'Z'
		lower = lower || 'a' <= c && c <= 'z'
		digit = digit || '0' <= c && c <= '9'
	}
	return upper && lower && digit
}

// basicCredentials reports whether v is base64 of "user:password".
func basicCredentials(_, v string) bool {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
	}
	return err == nil && strings.IndexByte(string(b), ':') > 0
}

// cookieValues returns the values of a Cookie or Set-Cookie header.
func cookieValues(h string) []string {
	var out []string
	for _, kv := range strings.Split(h, ";") {
		if _, v, ok := strings.Cut(kv, "="); ok {
			out = append(out, strings.Trim(strings.TrimSpace(v), `"`))
		}
	}
	return out
}

// isReference reports whether a value names where a secret comes from
// (an environment variable, a template) rather than being one.
func isReference(v string) bool {
	for _, p := range []string{"$", "%", "{{", "process.env.", "os.environ", "os.Getenv", "env.", "secrets."} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}
