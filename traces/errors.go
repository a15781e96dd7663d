package traces

import (
	"errors"
	"fmt"
)

// ErrRejected marks steps the store refused as bad input (no source, an
// invalid id, JSON that does not decode): storing them again will not
// help.
var ErrRejected = errors.New("rejected by the daemon")

// ErrBadRequest marks a step batch whose body does not decode (see
// DecodeBatch).
var ErrBadRequest = errors.New("bad request")

// badRequest returns an error wrapping ErrBadRequest.
func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, a...))
}
