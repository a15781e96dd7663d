package embedded_test

import (
	"context"
	"fmt"
	"os"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// The experience store contract, on the embedded backend: an experience put
// is found by a query about the same tool and error, and survives a reopen.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "hindsight-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	emb := embedder.NewLocal(256)

	st, err := embedded.Open(dir, emb, embedded.Options{})
	if err != nil {
		panic(err)
	}
	err = st.Put(ctx, &hindsight.Experience{
		ID: "exp-1", Namespace: "default", Server: "orders", Tool: "list_orders",
		Situation:  "list_orders failed: not logged in",
		Lesson:     "Call login before list_orders.",
		Confidence: 0.8,
	})
	if err != nil {
		panic(err)
	}
	if err := st.Close(); err != nil {
		panic(err)
	}

	st, err = embedded.Open(dir, emb, embedded.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	hits, err := st.Search(ctx, hindsight.Query{Text: "list_orders not logged in", Namespace: "default", K: 1, NoHit: true})
	if err != nil {
		panic(err)
	}
	for _, h := range hits {
		fmt.Println(h.ID, h.Lesson)
	}
	// Output:
	// exp-1 Call login before list_orders.
}
