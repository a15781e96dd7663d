package cli

import "errors"

// Commands not built yet. Each moves to a file of its own (wrap.go,
// serve.go, daemon.go, traces.go, experiences.go, reflect.go, demo.go) and
// leaves this file.

var errNotBuilt = errors.New("not built yet")
