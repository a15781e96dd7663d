//go:build linux

package main

import (
	"fmt"
	"io"
	"time"
)

// writeTable prints rows as two Markdown tables (times, then memory) and
// the ratios the goals are stated in.
func writeTable(w io.Writer, rows []row) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	lat := func(a, b time.Duration) string {
		return fmt.Sprintf("%.1f / %.1f ms", float64(a.Microseconds())/1000, float64(b.Microseconds())/1000)
	}
	mb := func(b int64) string { return fmt.Sprintf("%d MB", b>>20) }
	fmt.Fprintln(w, "| build | experiences | import (daemon CPU) | stop after import | first answer, clean start | first answer after SIGKILL | stop after searches | search p50 / p99 (clean) | (after SIGKILL) |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %.0f/s, %s (%s) | %s | %s | %s | %s | %s | %s |\n", r.name, r.n,
			float64(r.n)/r.importTime.Seconds(), ms(r.importTime), ms(r.importCPU), ms(r.stopImported), ms(r.startClean),
			ms(r.startKilled), ms(r.stopClean), lat(r.p50, r.p99), lat(r.p50K, r.p99K))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| build | experiences | RSS after import (peak) | clean start | after searches | after SIGKILL | after searches (peak) |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %s (%s) | %s | %s | %s | %s (%s) |\n", r.name, r.n, mb(r.rssImported), mb(r.hwmImport),
			mb(r.rssClean), mb(r.rssQueried), mb(r.rssKilled), mb(r.rssKilledQueried), mb(r.hwmKilled))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Of which pages of mapped files (RssFile: the index snapshot's vectors, Badger's tables), in the same states:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| build | experiences | after import | clean start | after searches | after SIGKILL | after searches |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s |\n", r.name, r.n, mb(r.file[0]), mb(r.file[1]), mb(r.file[2]), mb(r.file[3]), mb(r.file[4]))
	}
	fmt.Fprintln(w)
	var base *row
	for i, r := range rows {
		if r.name == "baseline" {
			base = &rows[i]
			continue
		}
		fmt.Fprintf(w, "- %d, %s: first answer after SIGKILL / after a clean start %.2f× (goal ≤ 1.5×), RSS %.2f× (≤ 1.2×); graceful stop / clean start %.2f× (≤ 1×)",
			r.n, r.name, r.startKilled.Seconds()/r.startClean.Seconds(), float64(r.rssKilled)/float64(r.rssClean),
			r.stopClean.Seconds()/r.startClean.Seconds())
		if base != nil && base.n == r.n {
			fmt.Fprintf(w, "; import %.1f× the baseline's rate (≥ 10×), %.1f× less daemon CPU", base.importTime.Seconds()/r.importTime.Seconds(),
				base.importCPU.Seconds()/r.importCPU.Seconds())
		}
		fmt.Fprintln(w)
	}
}
