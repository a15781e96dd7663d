package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/traces"
)

// Imports are untrusted. A pack is a file someone else wrote: its lessons
// reach every session's instructions, so what it claims about itself
// (confidence, evidence, dates, state, namespace) is not believed, and its
// text is cleaned as a model's answer would be.

// ImportConfidenceCap is hindsight.ImportConfidenceCap: the highest
// confidence an untrusted import gets; such a lesson is told to no agent
// until local evidence confirms it (hindsight.Experience.Unconfirmed).
const ImportConfidenceCap = hindsight.ImportConfidenceCap

// ImportOptions are the importer's choices, not the file's.
type ImportOptions struct {
	// Namespace receives every experience; "": the service's.
	Namespace string
	// Pack names the pack in each experience's origin ("import:PACK").
	Pack string
	// Trust keeps the pack's confidence instead of capping it at
	// ImportConfidenceCap. Everything else is cleaned regardless.
	Trust bool
}

// ImportResult says what an import did.
type ImportResult struct {
	Imported int      `json:"imported"` // new experiences
	Updated  int      `json:"updated"`  // newer versions of known ones
	Skipped  int      `json:"skipped"`  // known and unchanged, or local lessons a pack may not replace
	Errors   []string `json:"errors,omitempty"`
	// Kept lists the ids the pack shares with local lessons, which it
	// did not replace.
	Kept []string `json:"kept,omitempty"`
	// Redactions counts the secrets removed from the pack's text.
	Redactions int `json:"redactions,omitempty"`
}

// maxLine bounds one experience in an import.
const maxLine = 4 << 20

// LineError is one bad line of an import.
type LineError struct {
	Line int    `json:"line"`
	Err  string `json:"error"`
}

// ImportError lists every bad line of a pack; nothing of it was stored.
type ImportError struct{ Lines []LineError }

func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d invalid line(s), nothing imported:", len(e.Lines))
	for i, l := range e.Lines {
		if i == 20 {
			fmt.Fprintf(&b, "\n  … and %d more", len(e.Lines)-i)
			break
		}
		fmt.Fprintf(&b, "\n  line %d: %s", l.Line, l.Err)
	}
	return b.String()
}

// ParseImport reads a pack (JSON Lines, blank lines skipped) and cleans
// each experience with CleanImport. Any bad line fails the whole pack with
// an *ImportError naming every bad line.
func ParseImport(data []byte, opt ImportOptions, red Redactor, now time.Time) ([]hindsight.Experience, int, error) {
	var list []hindsight.Experience
	redactions, err := scanImport(bytes.NewReader(data), opt, red, now, func(e *hindsight.Experience) error {
		list = append(list, *e)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return list, redactions, nil
}

// scanImport is ParseImport reading r and calling each with every
// cleaned experience (which it may keep) instead of collecting them; an
// error of each, or of reading r, stops the scan and is returned.
func scanImport(r io.Reader, opt ImportOptions, red Redactor, now time.Time, each func(*hindsight.Experience) error) (int, error) {
	var bad []LineError
	redactions := 0
	rr := &readErr{r: r}
	sc := bufio.NewScanner(rr)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e hindsight.Experience
		if err := json.Unmarshal(line, &e); err != nil {
			bad = append(bad, LineError{n, err.Error()})
			continue
		}
		r, err := CleanImport(&e, opt, red, now)
		if err != nil {
			bad = append(bad, LineError{n, err.Error()})
			continue
		}
		redactions += r
		if len(bad) == 0 {
			if err := each(&e); err != nil {
				return 0, err
			}
		}
	}
	if rr.err != nil {
		return 0, rr.err
	}
	if err := sc.Err(); err != nil {
		bad = append(bad, LineError{n + 1, err.Error()})
	}
	if len(bad) > 0 {
		return 0, &ImportError{Lines: bad}
	}
	return redactions, nil
}

// cleanPack is a pack once parsed and cleaned (ParseImport's checks):
// its experiences re-encoded one a line, so that an import of many holds
// blocks of bytes the garbage collector does not scan, not an object graph
// of them all, until it stores them in parts.
type cleanPack struct {
	parts [][]byte // lines, each ending in '\n'; a line is never split between parts
	n     int
}

// packPart is the size of a cleanPack's parts: the pack grows a part at a
// time, never copied into a larger block.
const packPart = 1 << 20

// add appends b and a newline.
func (p *cleanPack) add(b []byte) {
	if i := len(p.parts) - 1; i >= 0 && len(p.parts[i])+len(b)+1 <= cap(p.parts[i]) {
		p.parts[i] = append(append(p.parts[i], b...), '\n')
	} else {
		part := make([]byte, 0, max(packPart, len(b)+1))
		p.parts = append(p.parts, append(append(part, b...), '\n'))
	}
	p.n++
}

// readErr is r keeping its first error other than io.EOF, so that a
// failed read (a body over its limit, a client gone) is told from a line
// too long.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// readPack parses and cleans the pack r holds (about size bytes; 0:
// unknown) into a cleanPack, holding no more of r than a line at a time.
func readPack(r io.Reader, size int64, opt ImportOptions, red Redactor, now time.Time) (*cleanPack, int, error) {
	p := &cleanPack{parts: make([][]byte, 0, min(max(size, 0), 256<<20)/packPart+1)}
	redactions, err := scanImport(r, opt, red, now, func(e *hindsight.Experience) error {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode experience %q: %w", e.ID, err)
		}
		p.add(b)
		return nil
	})
	return p, redactions, err
}

// each calls f with every experience of p, in order, each decoded anew,
// until f returns false. It empties p as it goes.
func (p *cleanPack) each(f func(*hindsight.Experience) bool) error {
	for i, rest := range p.parts {
		p.parts[i] = nil // read once: its memory goes as the import proceeds
		for len(rest) > 0 {
			line, tail, _ := bytes.Cut(rest, []byte{'\n'})
			rest = tail
			e := new(hindsight.Experience)
			if err := json.Unmarshal(line, e); err != nil {
				return fmt.Errorf("decode cleaned experience: %w", err)
			}
			if !f(e) {
				return nil
			}
		}
	}
	return nil
}

// CleanImport makes one imported experience safe to store, and reports
// how many secrets it redacted:
//
//   - every text field loses control characters and terminal escape
//     sequences (bidirectional overrides too), then goes through the
//     redactor;
//   - namespace and origin are the importer's (opt), superseded_by and
//     deleted are dropped, version and embedder reset;
//   - created_at and updated_at are clamped to now (a pack dated 2099
//     would otherwise sort first for ever); last_hit_at is dropped;
//   - hit and counter counts reset; the evidence count moves to
//     imported_evidence, for display;
//   - the text must pass guard.Check (trusted or not): a lesson that
//     addresses the model, overrides its instructions or moves secrets
//     fails its line, and so the pack;
//   - confidence is capped at ImportConfidenceCap unless opt.Trust;
//   - then store.Validate, and the id rules of the API.
func CleanImport(e *hindsight.Experience, opt ImportOptions, red Redactor, now time.Time) (int, error) {
	if e.ID == "" || strings.TrimSpace(e.Lesson) == "" {
		return 0, errors.New("an experience needs an id and a lesson")
	}
	if !traces.ValidID(e.ID) || e.ID != guard.Printable(e.ID) {
		return 0, fmt.Errorf("id %q may not contain '/', NUL or control characters", e.ID)
	}
	if math.IsNaN(e.Confidence) || e.Confidence < 0 || e.Confidence > 1 {
		return 0, fmt.Errorf("confidence %v is outside [0, 1]", e.Confidence)
	}
	redactions := 0
	for _, f := range []*string{&e.Server, &e.Tool, &e.TaskType, &e.ErrorCode, &e.Situation, &e.Action,
		&e.Result, &e.Lesson, &e.SourceTask, &e.SourceAgent, &e.ErrorTemplate} {
		*f = guard.Printable(*f)
		if red != nil && *f != "" {
			var n int
			*f, n = red.RedactString(*f)
			redactions += n
		}
	}
	if strings.TrimSpace(e.Lesson) == "" {
		return 0, errors.New("the lesson is empty once control characters are removed")
	}
	if f := CheckText(e); f != nil {
		return 0, fmt.Errorf("refused (%s): %q", f.Reason, f.Match)
	}
	e.Namespace = opt.Namespace
	e.Origin = "import"
	if opt.Pack != "" {
		e.Origin += ":" + opt.Pack
	}
	e.SupersededBy, e.Deleted = "", false
	e.Version, e.Embedder, e.Vector = 0, "", nil
	e.CreatedAt, e.UpdatedAt = clamp(e.CreatedAt, now), clamp(e.UpdatedAt, now)
	e.LastHitAt = nil
	e.ImportedEvidence = max(e.EvidenceCount, e.ImportedEvidence, 0)
	e.EvidenceCount, e.HitCount, e.CounterCount = 0, 0, 0
	if !opt.Trust && e.Confidence > ImportConfidenceCap {
		e.Confidence = ImportConfidenceCap
	}
	if err := store.Validate(e); err != nil {
		return 0, err
	}
	return redactions, nil
}

// clamp is t, but never after now (and now for a zero t).
func clamp(t, now time.Time) time.Time {
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}

// Import stores a pack: experiences as JSON Lines, parsed and cleaned
// first (ParseImport, with the service's Redactor), so that a bad line
// imports nothing (an error wrapping ErrInvalid, with an *ImportError's
// text). opt.Namespace "" is the service's namespace. A write that fails
// is listed in the result's Errors, and what the import inserted is
// removed again.
func (s *Service) Import(ctx context.Context, data []byte, opt ImportOptions) (ImportResult, error) {
	return s.ImportFrom(ctx, bytes.NewReader(data), int64(len(data)), opt)
}

// ImportFrom is Import reading the pack from r (about size bytes; 0:
// unknown): only the cleaned pack is held, not r's bytes. An error of
// reading r is returned as it is, wrapped, and imports nothing.
func (s *Service) ImportFrom(ctx context.Context, r io.Reader, size int64, opt ImportOptions) (ImportResult, error) {
	st, err := s.store()
	if err != nil {
		return ImportResult{}, err
	}
	if s.Redactor == nil {
		return ImportResult{}, fmt.Errorf("import: %w: no redactor", ErrUnavailable)
	}
	opt.Namespace, opt.Pack = s.Resolve(opt.Namespace), guard.Printable(opt.Pack)
	pack, redactions, err := readPack(r, size, opt, s.Redactor, time.Now())
	if err != nil {
		var ie *ImportError
		if errors.As(err, &ie) {
			return ImportResult{}, badRequest("%v", err)
		}
		return ImportResult{}, fmt.Errorf("import: %w", err)
	}
	res := s.importAll(ctx, st, pack)
	res.Redactions = redactions
	return res, nil
}

// batchPutter is a store that writes many experiences at once
// (store/embedded's PutBatch): Put's semantics, far fewer steps; between
// BeginBulk and its end it takes no snapshot of its index.
type batchPutter interface {
	PutBatch(ctx context.Context, exps []*hindsight.Experience) (int, error)
	BeginBulk() (end func())
}

// ImportPart is how many experiences an import hands a batchPutter at
// once: the decoded experiences of one part are all it holds.
const ImportPart = 2048

// importAll stores the cleaned experiences: new ids are inserted; an id
// that an earlier import brought is replaced when its text changed (its
// local counts, dates and state, pin included, are kept, and the confidence local
// evidence earned it); an id of a local lesson is never
// overwritten by a pack. When a write fails, what this import inserted is
// removed again (purged where the store can), so nothing partial stays.
// A store that writes in batches gets the writes in parts of ImportPart
// (an id met twice flushes the part first, so that its second line sees
// the first) within one BeginBulk, so that it takes one snapshot of its
// index at the end.
func (s *Service) importAll(ctx context.Context, st hindsight.ExperienceStore, pack *cleanPack) ImportResult {
	res := ImportResult{}
	var inserted []string
	ns := ""
	fail := func(e *hindsight.Experience, err error) {
		res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", e.ID, err))
	}
	bp, batched := st.(batchPutter)
	if batched {
		end := bp.BeginBulk()
		defer end()
	}
	var batch []*hindsight.Experience
	pending := map[string]bool{}
	isNew := map[string]bool{}
	flush := func() {
		if len(batch) == 0 {
			return
		}
		n, err := bp.PutBatch(ctx, batch)
		for _, e := range batch[:n] {
			if isNew[e.ID] {
				inserted = append(inserted, e.ID)
				ns = e.Namespace
				res.Imported++
			} else {
				res.Updated++
			}
		}
		if err != nil {
			fail(batch[min(n, len(batch)-1)], err)
		}
		batch = batch[:0]
		clear(pending)
		clear(isNew)
	}
	put := func(e *hindsight.Experience, fresh bool) {
		if !batched {
			if err := st.Put(ctx, e); err != nil {
				fail(e, err)
				return
			}
			if fresh {
				inserted = append(inserted, e.ID)
				ns = e.Namespace
				res.Imported++
			} else {
				res.Updated++
			}
			return
		}
		batch = append(batch, e)
		pending[e.ID] = true
		isNew[e.ID] = fresh
		if len(batch) >= ImportPart {
			flush()
		}
	}
	err := pack.each(func(e *hindsight.Experience) bool {
		if pending[e.ID] {
			flush()
		}
		if len(res.Errors) > 0 {
			return false
		}
		s.importOne(ctx, st, e, put, fail, &res)
		return len(res.Errors) == 0
	})
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	if len(res.Errors) == 0 {
		flush()
	}
	if len(res.Errors) > 0 && len(inserted) > 0 {
		if err := removeAll(ctx, st, ns, inserted); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("undo the import: %v", err))
		}
		res.Imported = 0
	}
	s.Logger.Info("experiences imported", "imported", res.Imported, "updated", res.Updated, "skipped", res.Skipped,
		"redactions", res.Redactions, "errors", len(res.Errors))
	return res
}

// importOne decides what an import does with e: put it (fresh: a new
// id), replace an earlier import's version, or skip it.
func (s *Service) importOne(ctx context.Context, st hindsight.ExperienceStore, e *hindsight.Experience,
	put func(*hindsight.Experience, bool), fail func(*hindsight.Experience, error), res *ImportResult) {
	old, err := st.Get(ctx, e.Namespace, e.ID)
	switch {
	case errors.Is(err, hindsight.ErrNotFound):
		put(e, true)
	case err != nil:
		fail(e, err)
	case !strings.HasPrefix(old.Origin, "import"):
		res.Skipped++
		res.Kept = append(res.Kept, e.ID)
	case sameText(old, e):
		res.Skipped++
	default:
		e.Version, e.CreatedAt, e.LastHitAt = old.Version, old.CreatedAt, old.LastHitAt
		e.EvidenceCount, e.HitCount, e.CounterCount = old.EvidenceCount, old.HitCount, old.CounterCount
		e.SupersededBy, e.Deleted, e.Pinned = old.SupersededBy, old.Deleted, old.Pinned
		if old.EvidenceCount > 0 { // local evidence confirmed it: keep what it earned
			e.Confidence = max(e.Confidence, old.Confidence)
		}
		if imp, shared := st.(store.Importer); shared {
			// An edit another daemon makes meanwhile is kept.
			if err := imp.Import(ctx, []*hindsight.Experience{e}); err != nil {
				fail(e, err)
				return
			}
			res.Updated++
		} else {
			put(e, false)
		}
	}
}

// sameText reports whether two experiences say the same thing.
func sameText(a, b *hindsight.Experience) bool {
	return a.Server == b.Server && a.Tool == b.Tool && a.TaskType == b.TaskType && a.ErrorCode == b.ErrorCode &&
		a.Situation == b.Situation && a.Action == b.Action && a.Result == b.Result && a.Lesson == b.Lesson &&
		a.ErrorTemplate == b.ErrorTemplate && a.Confidence == b.Confidence && a.Origin == b.Origin
}

// removeAll purges ids where the store can, else forgets them.
func removeAll(ctx context.Context, st hindsight.ExperienceStore, ns string, ids []string) error {
	if p, ok := st.(store.Purger); ok {
		_, err := p.Purge(ctx, ns, ids)
		return err
	}
	var errs []error
	for _, id := range ids {
		e, err := st.Get(ctx, ns, id)
		if err == nil {
			e.Deleted = true
			err = st.Put(ctx, e)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
