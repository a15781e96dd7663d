package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

// reembed recomputes the vectors of st with emb when the configured
// embedder changed since they were made (a store never mixes embedders:
// meanwhile it finds those experiences by text only). Progress goes to the
// log, and to a progress bar when the daemon runs in a terminal and not
// quiet. It
// reports how many experiences were re-embedded.
func reembed(ctx context.Context, st hindsight.ExperienceStore, emb hindsight.Embedder, logger *slog.Logger, quiet bool) (int, error) {
	r, ok := st.(store.Reembedder)
	if !ok {
		return 0, nil
	}
	n := r.NeedsReembed()
	if n == 0 {
		return 0, nil
	}
	logger.Info("embedder changed: re-embedding experiences", "embedder", emb.Name(), "dim", emb.Dim(), "experiences", n)
	bar := newBar(quiet, "re-embedding experiences", n)
	start, lastLog, total := time.Now(), time.Now(), 0
	err := r.Reembed(ctx, emb, func(done, all int) {
		total = done
		bar.set(done, all)
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			logger.Info("re-embedding experiences", "done", done, "total", all)
		}
	})
	bar.finish()
	if err != nil {
		return total, fmt.Errorf("re-embed experiences: %w", err)
	}
	logger.Info("re-embedded experiences", "experiences", total, "took", time.Since(start).Round(time.Millisecond))
	return total, nil
}
