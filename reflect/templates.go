package reflect

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
)

// Templates gives failed steps their error templates. It learns them
// online, task after task as reflection takes them up, with a Drain-style
// miner per server and tool (package errtemplate), and keeps the miner in
// the reflection queue's Badger database so templates survive restarts.
// Its zero value is not usable: call NewTemplates.
type Templates struct {
	mu    sync.Mutex
	miner *errtemplate.Miner
	db    *badger.DB // nil: kept in memory only
}

// templatesKey holds the miner's state in the queue's database.
var templatesKey = []byte("reflect-templates/miner")

// NewTemplates returns Templates kept in the database of the reflection
// queue q (nil: in memory), loading what it holds.
func NewTemplates(q *Queue) (*Templates, error) {
	t := &Templates{miner: errtemplate.NewMiner(errtemplate.Options{})}
	if q == nil {
		return t, nil
	}
	t.db = q.entries.db
	err := t.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(templatesKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(b []byte) error { return json.Unmarshal(b, t.miner) })
	})
	if err != nil {
		return nil, fmt.Errorf("load error templates: %w", err)
	}
	return t, nil
}

func templateKey(s *hindsight.Step) string { return s.Server + "\x00" + s.Tool }

// Learn adds the errors of task's failed tool calls to the miner and sets
// each failed step's ErrorTemplate to its template as it stands once the
// whole task is learned. It saves the miner when a template changed.
func (t *Templates) Learn(task *hindsight.Task) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := false
	ids := map[int]string{}
	for _, s := range ToolCalls(task) {
		if !s.Failed() {
			continue
		}
		c, ch := t.miner.Add(templateKey(s), errorText(s))
		changed = changed || ch
		ids[s.StepIndex] = c.ID
	}
	t.annotate(task, ids, newTaskValues(task))
	if !changed || t.db == nil {
		return nil
	}
	b, err := json.Marshal(t.miner)
	if err != nil {
		return fmt.Errorf("save error templates: %w", err)
	}
	if err := t.db.Update(func(txn *badger.Txn) error { return txn.Set(templatesKey, b) }); err != nil {
		return fmt.Errorf("save error templates: %w", err)
	}
	return nil
}

// annotate sets the template of the failed steps whose cluster ids are in
// ids (by step index), with the quoted names that are no value of the task
// (vals) put back (keepNames).
func (t *Templates) annotate(task *hindsight.Task, ids map[int]string, vals *taskValues) {
	for i := range task.Steps {
		s := &task.Steps[i]
		id, ok := ids[s.StepIndex]
		if !ok {
			continue
		}
		for _, c := range t.miner.Clusters(templateKey(s)) {
			if c.ID == id {
				s.ErrorTemplate = keepNames(c.Template, errorText(s), vals)
				break
			}
		}
	}
}

// Annotate sets the ErrorTemplate of task's failed tool calls from what
// the miner knows, without learning (AnnotateStep).
func (t *Templates) Annotate(task *hindsight.Task) {
	for _, s := range ToolCalls(task) {
		t.AnnotateStep(s)
	}
}

// AnnotateStep sets the ErrorTemplate of a failed tools/call step from
// what the miner knows, without learning: the template of the cluster its
// error joins, or its masked text when it joins none, with the quoted
// names that are no value of its call kept (keepNames). Other steps are left
// as they are.
func (t *Templates) AnnotateStep(s *hindsight.Step) {
	if s.Method != "tools/call" || s.Local || s.Tool == "" || !s.Failed() {
		return
	}
	text := errorText(s)
	t.mu.Lock()
	c, ok := t.miner.Match(templateKey(s), text)
	t.mu.Unlock()
	if ok {
		s.ErrorTemplate = keepNames(c.Template, text, stepValues(s))
	} else {
		s.ErrorTemplate = keepNames(errtemplate.Mask(text), text, stepValues(s))
	}
}
