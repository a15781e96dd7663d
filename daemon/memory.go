package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/memory"
)

// The API of the memory service (package memory): each handler decodes
// the request, calls the service and encodes its answer.

// The memory service's types, as the API and the client speak them.
type (
	StoreOps        = memory.Ops
	StoreOp         = memory.Op
	StoreOpsStats   = memory.OpsStats
	StoreStats      = memory.StoreStats
	EditRequest     = memory.EditRequest
	Provenance      = memory.Provenance
	SearchRequest   = memory.SearchRequest
	ImportOptions   = memory.ImportOptions
	ImportResult    = memory.ImportResult
	Rejection       = memory.Rejection
	RejectionLister = memory.RejectionLister
	PurgeResult     = memory.PurgeResult
	Redactor        = memory.Redactor
)

// ImportConfidenceCap is hindsight.ImportConfidenceCap: the highest
// confidence an untrusted import gets (see memory.CleanImport).
const ImportConfidenceCap = memory.ImportConfidenceCap

// PinRequest is the body of POST /v1/experiences/{id}/pin.
type PinRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Pinned    bool   `json:"pinned"`
}

// QueuedResult is the answer (202) to a write the daemon queued because
// the experience store was unreachable, or had writes waiting before it.
type QueuedResult struct {
	Queued bool   `json:"queued"`
	Op     uint64 `json:"op"`
}

// QueuedError is what Client methods return for a write the daemon queued
// (see QueuedResult): not a failure, but the write is not applied yet.
type QueuedError struct{ Op uint64 }

func (e *QueuedError) Error() string {
	return fmt.Sprintf("queued: the store is unreachable; applied when it is back (op %d)", e.Op)
}

func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("%s: %v", name, err)
	}
	return b, nil
}

// listOptions reads ?namespace=&server=&tool=&deleted=&superseded=&limit=
// and the provenance filters ?origin=, ?agent= and ?machine=.
func listOptions(r *http.Request) (hindsight.ListOptions, Provenance, error) {
	q := r.URL.Query()
	opt := hindsight.ListOptions{Namespace: q.Get("namespace"), Server: q.Get("server"), Tool: q.Get("tool")}
	prov := Provenance{Origin: q.Get("origin"), SourceAgent: q.Get("agent"), SourceMachine: q.Get("machine")}
	var err error
	if opt.IncludeDeleted, err = boolParam(r, "deleted"); err != nil {
		return opt, prov, err
	}
	if opt.IncludeSuperseded, err = boolParam(r, "superseded"); err != nil {
		return opt, prov, err
	}
	if v := q.Get("limit"); v != "" {
		if opt.Limit, err = strconv.Atoi(v); err != nil || opt.Limit < 0 {
			return opt, prov, badRequest("limit: not a count: %q", v)
		}
	}
	return opt, prov, nil
}

// listExperiences lists what the request's query selects; on failure it
// has answered the request and reports false.
func (s *Server) listExperiences(w http.ResponseWriter, r *http.Request) ([]hindsight.Experience, bool) {
	err := s.mem.Check()
	var opt hindsight.ListOptions
	var prov Provenance
	if err == nil {
		opt, prov, err = listOptions(r)
	}
	var list []hindsight.Experience
	if err == nil {
		list, err = s.mem.List(r.Context(), opt, prov)
	}
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return list, true
}

func (s *Server) handleExperiences(w http.ResponseWriter, r *http.Request) {
	list, ok := s.listExperiences(w, r)
	if !ok {
		return
	}
	if list == nil {
		list = []hindsight.Experience{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) handleExportExperiences(w http.ResponseWriter, r *http.Request) {
	list, ok := s.listExperiences(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range list {
		if err := enc.Encode(&list[i]); err != nil {
			return
		}
	}
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	var req SearchRequest
	err := s.mem.Check()
	if err == nil {
		err = decodeBody(w, r, &req)
	}
	var res []hindsight.ScoredExperience
	if err == nil {
		res, err = s.mem.Search(r.Context(), req)
	}
	s.answer(w, r, res, err)
}

func (s *Server) handleExperience(w http.ResponseWriter, r *http.Request) {
	e, err := s.mem.Get(r.Context(), r.URL.Query().Get("namespace"), r.PathValue("id"))
	s.answer(w, r, e, err)
}

func (s *Server) handleForget(w http.ResponseWriter, r *http.Request)  { s.setDeleted(w, r, true) }
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) { s.setDeleted(w, r, false) }

func (s *Server) setDeleted(w http.ResponseWriter, r *http.Request, deleted bool) {
	kind := memory.OpRestore
	if deleted {
		kind = memory.OpForget
	}
	s.write(w, r, StoreOp{Kind: kind, Namespace: r.URL.Query().Get("namespace"), IDs: []string{r.PathValue("id")}})
}

// handleEdit stores the edited experience as its next version, with origin
// memory.EditOrigin. An edit queued while the store is unreachable
// applies to the version stored then.
func (s *Server) handleEdit(w http.ResponseWriter, r *http.Request) {
	var req EditRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.write(w, r, StoreOp{Kind: memory.OpEdit, Namespace: req.Namespace, IDs: []string{r.PathValue("id")}, Edit: &req})
}

// handlePin pins or unpins an experience (hindsight.Experience.Pinned).
func (s *Server) handlePin(w http.ResponseWriter, r *http.Request) {
	var req PinRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.write(w, r, StoreOp{Kind: memory.OpPin, Namespace: req.Namespace, IDs: []string{r.PathValue("id")}, Pinned: req.Pinned})
}

// write answers what the service's Write did: the experience, or what a
// purge removed; 202 with a QueuedResult for a write it queued.
func (s *Server) write(w http.ResponseWriter, r *http.Request, op StoreOp) {
	res, err := s.mem.Write(r.Context(), op)
	switch {
	case err != nil:
		s.fail(w, r, err)
	case res.Queued != 0:
		writeJSON(w, http.StatusAccepted, QueuedResult{Queued: true, Op: res.Queued})
	case res.Purged != nil:
		writeJSON(w, http.StatusOK, res.Purged)
	default:
		writeJSON(w, http.StatusOK, res.Experience)
	}
}

func (s *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opt := ImportOptions{Namespace: q.Get("namespace"), Pack: q.Get("pack")}
	err := s.mem.Check()
	if err == nil {
		opt.Trust, err = boolParam(r, "trust")
	}
	var res ImportResult
	if err == nil {
		// Read as it is parsed: the daemon holds the cleaned pack, not
		// the request's bytes too.
		body := http.MaxBytesReader(w, r.Body, maxBody)
		res, err = s.mem.ImportFrom(r.Context(), body, min(r.ContentLength, maxBody), opt)
	}
	s.answer(w, r, res, err) // failed writes are in res.Errors, undone
	if res.Imported+res.Updated >= memory.ImportPart {
		// A large import leaves its pack and its parts as garbage, far
		// above the live heap: give the pages back now rather than as
		// the scavenger gets to them.
		debug.FreeOSMemory()
	}
}

// handleRejected is GET /v1/experiences/rejected?limit=N: the latest
// refused lessons, newest first, with the quarantined ones.
func (s *Server) handleRejected(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	list, err := s.mem.Rejected(r.Context(), limit)
	s.answer(w, r, list, err)
}
