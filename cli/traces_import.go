package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// importBatch is how many steps `traces import` sends at once; a batch
// ends at a task's boundary when it can, so a task goes final once.
const importBatch = 2000

func tracesImportCmd(g *globals) *cobra.Command {
	c := leaf("import [--json] FILE|-", "steps of another machine's traces export; importing again changes nothing",
		"  hindsight traces import steps.jsonl\n  ssh box hindsight traces export | hindsight traces import -")
	asJSON := c.Flags().Bool("json", false, "print the result as JSON")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return tracesImport(ctx, g, fs, pos, asJSON)
	})
}

// tracesImport is `hindsight traces import FILE|-`: the steps of another
// machine's `traces export`, stored by the daemon (traces.Store.Import):
// importing twice stores nothing new.
func tracesImport(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON *bool) error {
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("traces import takes one file (- for stdin)")
	}
	var r io.Reader = os.Stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("import traces: %w", err)
		}
		defer f.Close()
		r = f
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	var total daemon.IngestResult
	err = readExport(r, func(batch []hindsight.Step) error {
		res, err := c.ImportSteps(ctx, batch)
		total.Accepted += res.Accepted
		total.Duplicates += res.Duplicates
		return err
	})
	if err != nil {
		return fmt.Errorf("import traces: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, total)
	}
	fmt.Fprintf(stdout, "imported %d steps (%d already present)\n", total.Accepted, total.Duplicates)
	return nil
}

// readExport decodes a `traces export` stream, one hindsight.Step a line
// (blank lines skipped), and calls fn with batches of steps, cut at task
// boundaries once importBatch steps are reached.
func readExport(r io.Reader, fn func([]hindsight.Step) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	var batch []hindsight.Step
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(trimSpace(b)) == 0 {
			continue
		}
		var s hindsight.Step
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if n := len(batch); n >= importBatch && (batch[n-1].TaskID != s.TaskID || n >= 4*importBatch) {
			if err := fn(batch); err != nil {
				return err
			}
			batch = nil
		}
		batch = append(batch, s)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read line %d: %w", line+1, err)
	}
	if len(batch) > 0 {
		return fn(batch)
	}
	return nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
