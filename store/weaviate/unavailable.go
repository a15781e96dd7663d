package weaviate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/fault"
)

// unreachableMarks are pieces of the messages of errors that mean no
// Weaviate node answered: the client library keeps the network error only
// as text in some paths (gRPC, batch results).
var unreachableMarks = []string{
	"connection refused", "connection reset", "broken pipe", "no such host", "i/o timeout",
	"timeout exceeded", "deadline exceeded", "code = unavailable", "503 service unavailable", ": eof",
	errNotReady.Error(),
}

// errNotReady is the error of a read answered "not found" by a Weaviate
// that is not ready: one starting up answers so for objects it holds
// until it has loaded them.
var errNotReady = errors.New("weaviate is not ready")

// notReady returns errNotReady unless Weaviate says it is ready: a "not
// found" is believed only from a ready server. The error is transient
// (retry tries again) and, after the retries, unreachable.
func (s *Store) notReady(ctx context.Context) error {
	ok, err := s.c.Misc().ReadyChecker().Do(ctx)
	if err != nil || !ok {
		return errNotReady
	}
	return nil
}

// unreachable reports whether err means that Weaviate could not be reached
// (refused, reset or timed-out connections, a 502/503/504 answer), rather
// than an answer refusing the operation. An error of the caller's own
// cancelled context is not.
func unreachable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return false
	}
	var we *fault.WeaviateClientError
	if errors.As(err, &we) {
		switch {
		case we.StatusCode == 502 || we.StatusCode == 503 || we.StatusCode == 504:
			return true
		case we.IsUnexpectedStatusCode:
			return false
		case we.DerivedFromError != nil && unreachable(ctx, we.DerivedFromError):
			return true
		}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range unreachableMarks {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// markUnavailable wraps err with hindsight.ErrStoreUnavailable when it
// means that Weaviate could not be reached.
func markUnavailable(ctx context.Context, err error) error {
	if unreachable(ctx, err) && !errors.Is(err, hindsight.ErrStoreUnavailable) {
		return fmt.Errorf("%w: %w", hindsight.ErrStoreUnavailable, err)
	}
	return err
}
