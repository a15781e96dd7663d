package memory_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/memory"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// A pack is imported (cleaned, redacted, its confidence capped), searched
// for a situation, then forgotten.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "memory-example")
	defer os.RemoveAll(dir)
	st, err := embedded.Open(dir, embedder.NewLocal(0), embedded.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	red, _ := capture.NewRedactor(capture.RedactorConfig{})
	svc := &memory.Service{Store: st, StoreName: "embedded", Redactor: red}

	pack := `{"id":"e1","server":"fs","tool":"read_file","situation":"read_file failed with ENOENT",` +
		`"action":"called read_file with GITHUB_TOKEN=ghp_Zk3qR8vT2mW9xY4nB6cD1eF5gH7jK0lPq2sT",` +
		`"lesson":"Call read_file with an absolute path under /data.","confidence":0.95}`
	res, err := svc.Import(ctx, []byte(pack), memory.ImportOptions{Pack: "team"})
	fmt.Println("imported:", res.Imported, "secrets removed:", res.Redactions, err)

	found, _ := svc.Search(ctx, memory.SearchRequest{Query: hindsight.Query{Text: "read_file ENOENT absolute path", K: 3}})
	for _, e := range found {
		fmt.Printf("%s %s (%s, confidence %.1f)\n", e.ID, e.Lesson, e.Origin, e.Confidence)
		fmt.Println("secret kept:", strings.Contains(e.Action, "ghp_"))
	}

	w, err := svc.Write(ctx, memory.Op{Kind: memory.OpForget, IDs: []string{"e1"}})
	fmt.Println("forgotten:", w.Experience.Deleted, err)
	// Output:
	// imported: 1 secrets removed: 1 <nil>
	// e1 Call read_file with an absolute path under /data. (import:team, confidence 0.5)
	// secret kept: false
	// forgotten: true <nil>
}
