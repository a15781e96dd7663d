package traces

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"
)

// ImportSource names the source of an imported step that carries none
// (an export from a store that did not record sources): "import-" and its
// task id. Its Seq is then the step's index plus one, so importing the
// same file again finds the same steps.
func ImportSource(taskID string) string { return "import-" + taskID }

// Import stores steps that another store exported (`hindsight traces
// export`, one hindsight.Step a line), through the same path as a
// sidecar's batches:
//
//   - Steps keep their Source and Seq, so importing a file twice, or into
//     the store it came from, stores each step once and changes nothing
//     else. A step without a source gets ImportSource(TaskID) and its
//     index plus one as Seq.
//   - Tasks are segmented again, by the task id they had in the export
//     (as if the agent had named it), so a task keeps its id and its
//     steps their indices: exporting what was imported gives the export
//     back. A step without a task id is segmented like a sidecar's.
//   - The sessions of the steps that were new are recorded as closed (an
//     exported session is over), so their tasks become final, ready for
//     reflection; a task of new steps without a session (episodes) is made
//     final as the agent would (MarkFinal), not left to the idle gap.
//
// The stored step is the exported one: the task id used for segmentation
// is not written into its explicit_task.
func (t *Store) Import(ctx context.Context, steps []hindsight.Step) (IngestResult, error) {
	raws := make([]wire.Raw, len(steps))
	var sessions, sessionless []string
	for i := range steps {
		s := steps[i] // a copy: the caller's steps stay as they were
		if s.Source == "" && ValidID(s.TaskID) {
			s.Source, s.Seq = ImportSource(s.TaskID), uint64(s.StepIndex)+1
		}
		if err := validateStep(i, s.Source); err != nil {
			return IngestResult{}, fmt.Errorf("import steps: %w: %w", ErrRejected, err)
		}
		b, err := wire.AppendStep(nil, &s)
		if err != nil {
			return IngestResult{}, fmt.Errorf("import steps: %w: step %d: %w", ErrRejected, i, err)
		}
		m := wire.MetaOf(&s)
		if m.ExplicitTask == "" && ValidID(s.TaskID) {
			m.ExplicitTask = s.TaskID
		}
		raws[i] = wire.Raw{Meta: m, JSON: b}
		if s.SessionID != "" && !slices.Contains(sessions, s.SessionID) {
			sessions = append(sessions, s.SessionID)
		}
		if s.SessionID == "" && ValidID(s.TaskID) && !slices.Contains(sessionless, s.TaskID) {
			sessionless = append(sessionless, s.TaskID)
		}
	}
	res, err := t.ingestRaw(ctx, raws)
	if err != nil {
		return res, fmt.Errorf("import steps: %w", err)
	}
	if res.Accepted == 0 {
		return res, nil // nothing new: nothing changes
	}
	for _, sid := range sessions {
		if _, err := t.CloseSession(ctx, sid, "", nil); err != nil {
			return res, fmt.Errorf("import steps: %w", err)
		}
	}
	for _, id := range sessionless {
		if _, err := t.MarkFinal(ctx, id); err != nil && !errors.Is(err, hindsight.ErrNotFound) {
			return res, fmt.Errorf("import steps: %w", err)
		}
	}
	return res, nil
}
