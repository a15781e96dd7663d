package weaviate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weaviate/weaviate-go-client/v5/weaviate/fault"
)

func TestTransient(t *testing.T) {
	status := func(code int, msg string) error {
		return &fault.WeaviateClientError{StatusCode: code, Msg: msg}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"new tenant's shard", status(500, `get remote object: shard=team: local team shard not found`), true},
		{"tenant not yet on the node", status(422, `tenant not found: "team"`), true},
		{"leader change", status(500, "leader not found"), true},
		{"leader killed", status(422, `repo: object by id: search index clustershared: determine shard: fetch tenant status for class "ClusterShared": failed to execute query: rpc error: code = Canceled desc = grpc: the client connection is closing`), true},
		{"any 5xx", status(503, "busy"), true},
		{"node gone", fmt.Errorf("post: %w", errors.New("dial tcp 127.0.0.1:1: connect: connection refused")), true},
		{"not found", status(404, ""), false},
		{"validation", status(422, "invalid property value"), false},
		{"unauthorised", status(401, "unauthorized"), false},
		{"cancelled", fmt.Errorf("get: %w", context.Canceled), false},
		{"request timed out", errors.New(`Get "http://n1/v1/objects": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`), true},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestConsistency(t *testing.T) {
	for _, tc := range []struct {
		level  string
		factor int
		want   string
		bad    bool
	}{
		{"", 1, "", false},
		{"QUORUM", 1, "", false},
		{"", 3, "QUORUM", false},
		{"one", 3, "ONE", false},
		{"ALL", 2, "ALL", false},
		{"MOST", 3, "", true},
	} {
		got, err := consistency(tc.level, tc.factor)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("consistency(%q, %d) = %q, %v; want %q (error %v)", tc.level, tc.factor, got, err, tc.want, tc.bad)
		}
	}
}
