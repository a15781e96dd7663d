package reflect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

// Deduplicated is the merge outcome counted for a copy of a lesson that
// another daemon sharing the store learnt at the same moment, merged into
// the older copy after both were added.
const Deduplicated = "deduplicated"

// Two daemons sharing a store that learn the same lesson at the same
// moment both find nothing similar and both add it. So after adding, the
// merger looks again: a copy that the merge rule would have merged (same
// namespace, tool and server, agreeing templates, the same lesson or a
// cosine of at least the threshold, not its opposite; live) is merged
// with the new one into the older of the two (then the smaller id):
// evidence tasks and counts united, the higher confidence, pinned when
// either was, forgotten when either was by then;
// the newer is superseded by it (kept, as every superseded lesson is). Of
// two daemons adding at once, the one that lists last sees the other's
// copy (each lists after its own write completed), and a merge done twice
// changes nothing the second time, so the copies end merged whoever does it.

// dedupe merges the copies of e (just added) into the oldest; it returns
// the id that survives.
func (m *Merger) dedupe(ctx context.Context, e *hindsight.Experience) (string, error) {
	keep, _, err := m.mergeCopies(ctx, e)
	return keep, err
}

// mergeCopies merges the copies of e, and e, into the oldest of them; it
// returns the id that survives and the ids merged into it.
func (m *Merger) mergeCopies(ctx context.Context, e *hindsight.Experience) (string, []string, error) {
	dups, err := m.copiesOf(ctx, e)
	if err != nil || len(dups) == 0 {
		return e.ID, nil, err
	}
	all := append(dups, *e)
	slices.SortFunc(all, func(a, b hindsight.Experience) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	keep := all[0]
	var merged []string
	for _, loser := range all[1:] {
		if err := m.mergeCopy(ctx, keep.Namespace, keep.ID, loser.ID); err != nil {
			return e.ID, merged, err
		}
		merged = append(merged, loser.ID)
		m.Metrics.merge(Deduplicated)
		m.logger().Info("reflect: a copy of a lesson learnt at the same time elsewhere merged", "kept", keep.ID, "merged", loser.ID)
	}
	return keep.ID, merged, nil
}

// copiesOf returns the live experiences the merge rule takes for e.
func (m *Merger) copiesOf(ctx context.Context, e *hindsight.Experience) ([]hindsight.Experience, error) {
	known, err := m.Store.List(ctx, hindsight.ListOptions{Namespace: e.Namespace, Tool: e.Tool})
	if err != nil {
		return nil, fmt.Errorf("list experiences: %w", err)
	}
	live := known[:0]
	for _, k := range known {
		if k.ID != e.ID && !k.Deleted && k.SupersededBy == "" && k.Tool == e.Tool && (e.Server == "" || k.Server == "" || k.Server == e.Server) {
			live = append(live, k)
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	vecs, err := m.vectors(ctx, e, live)
	if err != nil {
		return nil, err
	}
	threshold := m.Threshold
	if threshold == 0 {
		threshold = DefaultDuplicateThreshold
	}
	var out []hindsight.Experience
	for i := range live {
		k := &live[i]
		switch {
		case sameLesson(e, k):
		case e.ErrorTemplate != "" && k.ErrorTemplate != "" && !templatesAgree(e.ErrorTemplate, k.ErrorTemplate),
			contradicts(e.Lesson, k.Lesson),
			store.Cosine(vecs[0], vecs[2+2*i]) < threshold:
			continue
		}
		out = append(out, *k)
	}
	return out, nil
}

// mergeCopy merges experience loser into keep (both of ns) and supersedes
// it, again on a version conflict.
func (m *Merger) mergeCopy(ctx context.Context, ns, keep, loser string) error {
	for try := 0; ; try++ {
		err := m.mergeCopyOnce(ctx, ns, keep, loser)
		if !errors.Is(err, hindsight.ErrConflict) || try == 4 {
			return err
		}
	}
}

func (m *Merger) mergeCopyOnce(ctx context.Context, ns, keepID, loserID string) error {
	keep, err := m.Store.Get(ctx, ns, keepID)
	if err != nil {
		return fmt.Errorf("merge copies: %w", err)
	}
	loser, err := m.Store.Get(ctx, ns, loserID)
	if err != nil {
		return fmt.Errorf("merge copies: %w", err)
	}
	changed := false
	tasks := keep.EvidenceTasks
	if len(tasks) == 0 && keep.SourceTask != "" {
		tasks = []string{keep.SourceTask}
	}
	their := loser.EvidenceTasks
	if len(their) == 0 && loser.SourceTask != "" {
		their = []string{loser.SourceTask}
	}
	for _, t := range their {
		if !slices.Contains(tasks, t) {
			tasks = append(tasks, t)
			keep.EvidenceCount = max(keep.EvidenceCount, 1) + 1
			changed = true
		}
	}
	if n := len(tasks); n > hindsight.MaxEvidenceTasks {
		tasks = tasks[n-hindsight.MaxEvidenceTasks:]
	}
	keep.EvidenceTasks = tasks
	if loser.Pinned && !keep.Pinned {
		keep.Pinned, changed = true, true
	}
	if loser.Deleted && !keep.Deleted {
		keep.Deleted, changed = true, true
	}
	if loser.Confidence > keep.Confidence && keep.Origin != "manual" {
		keep.Confidence, changed = loser.Confidence, true
	}
	if changed {
		// Named by the pair: two daemons merging it at once store one
		// change, and the evidence it adds counts once.
		if err := m.putOnce(ctx, keep, "merge "+loserID); err != nil {
			return fmt.Errorf("merge copies: %w", err)
		}
	}
	if loser.SupersededBy == keep.ID {
		return nil
	}
	loser.SupersededBy = keepID
	if err := m.Store.Put(ctx, loser); err != nil {
		return fmt.Errorf("merge copies: %w", err)
	}
	return nil
}

// putOnce stores e through the store's PutOnce when it has one (a store
// without compare-and-set, see store/weaviate), else Put.
func (m *Merger) putOnce(ctx context.Context, e *hindsight.Experience, key string) error {
	if s, ok := m.Store.(interface {
		PutOnce(context.Context, *hindsight.Experience, string) error
	}); ok {
		return s.PutOnce(ctx, e, key)
	}
	return m.Store.Put(ctx, e)
}
