package weaviate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/fault"
)

// Consistency levels of replicated reads and writes (Config.Consistency).
const (
	ConsistencyOne    = "ONE"
	ConsistencyQuorum = "QUORUM"
	ConsistencyAll    = "ALL"
)

// DefaultRetryFor bounds the retry of one operation's transient cluster
// errors when Config.RetryFor is zero.
const DefaultRetryFor = 20 * time.Second

// DefaultTimeout bounds one request when Config.Timeout is zero: a node that
// hangs (killed without its peers knowing yet, or electing a leader) costs
// one try, not the operation.
const DefaultTimeout = 10 * time.Second

// consistency returns the level of cfg for a collection replicated factor
// times: "" (Weaviate's default) for one copy, else cfg's level, QUORUM
// when unset.
func consistency(level string, factor int) (string, error) {
	level = strings.ToUpper(strings.TrimSpace(level))
	switch level {
	case "", ConsistencyOne, ConsistencyQuorum, ConsistencyAll:
	default:
		return "", fmt.Errorf("consistency level %q: want ONE, QUORUM or ALL", level)
	}
	if factor <= 1 {
		return "", nil
	}
	if level == "" {
		return ConsistencyQuorum, nil
	}
	return level, nil
}

// transientMarks are pieces of the messages of errors that a cluster
// recovers from by itself: a new tenant's shard not yet on this node, a
// node that just left or is not ready, a leader being elected.
var transientMarks = []string{
	"shard not found", "tenant not found", "not found for tenant", "no tenant", "leader",
	"connection refused", "connection reset", "broken pipe", "unavailable", "not ready",
	"eof", "i/o timeout", "timeout exceeded", "deadline exceeded", "replication", "replica", "not enough", "no such host", "raft",
	// A node's gRPC link to a leader that just died ("determine shard:
	// fetch tenant status: ... grpc: the client connection is closing").
	"connection is closing", "transport is closing", "fetch tenant status",
}

// transient reports whether err is worth retrying (retry stops anyway when
// its context ends: a request that timed out on its own is retried).
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var we *fault.WeaviateClientError
	if errors.As(err, &we) {
		if we.StatusCode >= 500 {
			return true
		}
		if we.StatusCode == 404 || (we.StatusCode >= 400 && we.StatusCode < 500 && we.StatusCode != 422) {
			return false
		}
	}
	msg := strings.ToLower(err.Error())
	for _, m := range transientMarks {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// retry runs op until it succeeds, fails for good (an error that is not
// transient), ctx ends or s.retryFor has passed, waiting with exponential
// backoff between tries. An error that means Weaviate could not be reached
// wraps hindsight.ErrStoreUnavailable. Every operation passed is idempotent: writes are
// upserts of a known object id, so a try that succeeded without its
// answer arriving is harmless to repeat.
//
// The store's breaker cuts this short while Weaviate is known to be down:
// a try that fails unreachable, followed by a readiness probe that gets no
// answer, ends the retry and opens the breaker, as does a retry that ran
// out unreachable; while it is open, retry fails at once (see breaker).
func (s *Store) retry(ctx context.Context, op func() error) error {
	if err := s.brk.allow(ctx); err != nil {
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = s.retryFor
	tries := 0
	err := backoff.Retry(func() error {
		tries++
		err := op()
		if err != nil && (ctx.Err() != nil || !transient(err) || s.brk.trip(ctx, err)) {
			return backoff.Permanent(err)
		}
		if err != nil {
			s.log.Debug("weaviate: transient error, retrying", "err", err, "try", tries)
		}
		return err
	}, backoff.WithContext(b, ctx))
	var pe *backoff.PermanentError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	err = markUnavailable(ctx, err)
	if errors.Is(err, hindsight.ErrStoreUnavailable) {
		s.brk.openAfter(err)
	}
	return err
}
