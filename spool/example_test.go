package spool_test

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/spool"
)

// printer is a Deliverer standing in for the daemon: it prints what it is
// given. The real one is the daemon's client (daemon.Client).
type printer struct{ mu sync.Mutex }

func (p *printer) Deliver(_ context.Context, steps []hindsight.Step) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range steps {
		fmt.Printf("delivered #%d %s\n", s.Seq, s.Tool)
	}
	return nil
}

// A sidecar opens one spool, appends the steps its recorder builds, and
// closes it when its agent goes: Close delivers what is left, in order,
// and removes the outbox directory.
func Example() {
	home, err := os.MkdirTemp("", "spool-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(home)

	s, err := spool.Open(spool.Options{Home: hindsight.Home(home), Deliverer: &printer{}})
	if err != nil {
		panic(err)
	}
	s.Append([]hindsight.Step{
		{TaskID: "t1", Tool: "list_tables", Method: "tools/call"},
		{TaskID: "t1", Tool: "query", Method: "tools/call"},
	})
	if err := s.Close(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("outboxes left:", len(spool.List(hindsight.Home(home))))
	// Output:
	// delivered #1 list_tables
	// delivered #2 query
	// outboxes left: 0
}
