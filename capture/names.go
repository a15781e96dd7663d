package capture

import "sync"

// maxNames bounds the identifiers whose redacted form a Redactor keeps.
const maxNames = 1024

// names caches RedactName's answers: a session's server name and task id
// are the same on every step.
type names struct {
	mu sync.Mutex
	m  map[string]string
}

// RedactName redacts an identifier (a server name, a task id): one that
// holds a secret, whole or in part, gets the secret replaced, as text. Names
// end up in keys, file names and log lines, where nothing else would
// redact them. Answers are cached (up to maxNames names).
func (r *Redactor) RedactName(s string) string {
	if len(s) < minSecretLen {
		return s
	}
	r.names.mu.Lock()
	out, ok := r.names.m[s]
	r.names.mu.Unlock()
	if ok {
		return out
	}
	out, _ = r.RedactString(s)
	r.names.mu.Lock()
	if r.names.m == nil || len(r.names.m) >= maxNames {
		r.names.m = make(map[string]string)
	}
	r.names.m[s] = out
	r.names.mu.Unlock()
	return out
}
