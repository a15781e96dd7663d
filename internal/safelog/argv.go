package safelog

import (
	"strings"
)

// argvPlaceholder replaces a value that a command line's flag or variable
// name says is secret.
const argvPlaceholder = "[REDACTED:flag]"

// RedactArgv returns argv with the values of secret-named flags and
// variables replaced, whatever the values look like: `--api-key V` and
// `--api-key=V`, `-token V`, and env-style `GITHUB_TOKEN=V`. A name is
// secret when one of its words (split on '-', '_' and '.') is key,
// token, secret, password, passwd, pwd, credential(s) or creds, or starts
// with auth. argv itself is not changed; it is returned as it is when
// nothing was redacted.
func RedactArgv(argv []string) []string {
	var out []string
	set := func(i int, v string) {
		if out == nil {
			out = append([]string(nil), argv...)
		}
		out[i] = v
	}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if strings.HasPrefix(a, "-") && a != "-" && a != "--" {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !secretName(name) {
				continue
			}
			if hasValue {
				set(i, a[:strings.IndexByte(a, '=')+1]+argvPlaceholder)
			} else if i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
				set(i+1, argvPlaceholder)
				i++
			}
			continue
		}
		if name, _, ok := strings.Cut(a, "="); ok && envName(name) && secretName(name) {
			set(i, name+"="+argvPlaceholder)
		}
	}
	if out == nil {
		return argv
	}
	return out
}

// secretName reports whether a flag or variable name says its value is a
// secret.
func secretName(name string) bool {
	for _, w := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
		switch w {
		case "key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "creds", "pat":
			return true
		}
		if strings.HasPrefix(w, "auth") {
			return true
		}
	}
	return false
}

// envName reports whether s can be an environment variable's name.
func envName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
