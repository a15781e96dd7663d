package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/traces"
)

func (s *Server) store() (hindsight.ExperienceStore, error) {
	if s.Store == nil {
		return nil, fmt.Errorf("experiences: %w: the daemon has no experience store open (see its log)", ErrUnavailable)
	}
	return s.Store, nil
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

func listOptions(r *http.Request) (hindsight.ListOptions, error) {
	q := r.URL.Query()
	opt := hindsight.ListOptions{Namespace: q.Get("namespace"), Server: q.Get("server"), Tool: q.Get("tool")}
	var err error
	if opt.IncludeDeleted, err = boolParam(r, "deleted"); err != nil {
		return opt, err
	}
	if opt.IncludeSuperseded, err = boolParam(r, "superseded"); err != nil {
		return opt, err
	}
	if v := q.Get("limit"); v != "" {
		if opt.Limit, err = strconv.Atoi(v); err != nil || opt.Limit < 0 {
			return opt, badRequest("limit: not a count: %q", v)
		}
	}
	return opt, nil
}

// listExperiences lists what the request's query selects; on failure it
// has answered the request and reports false.
func (s *Server) listExperiences(w http.ResponseWriter, r *http.Request) ([]hindsight.Experience, bool) {
	st, err := s.store()
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	opt, err := listOptions(r)
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	prov := provenanceQuery(r.URL.Query().Get)
	limit := opt.Limit
	if !prov.Empty() {
		opt.Limit = 0 // the filter runs after the store's
	}
	list, err := st.List(r.Context(), opt)
	if err != nil {
		s.fail(w, r, fmt.Errorf("list experiences: %w", err))
		return nil, false
	}
	if !prov.Empty() {
		list = filterExperiences(list, prov, limit)
	}
	for i := range list {
		s.hits.overlay(&list[i])
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

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	st, err := s.store()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req SearchRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	q := req.Query
	q.Namespace = s.namespace(q.Namespace)
	k := q.K
	if k <= 0 {
		k = 5
	}
	if !req.Provenance.Empty() {
		q.K = max(5*k, 50) // filtered after the store's ranking
	}
	// The daemon records the hits itself, once, whatever the backend does
	// on its own.
	noHit := q.NoHit
	q.NoHit = true
	res, err := st.Search(r.Context(), q)
	if err != nil {
		s.fail(w, r, fmt.Errorf("search experiences: %w", err))
		return
	}
	if q.IncludePinned && q.Server != "" {
		if res, err = s.withPinned(r.Context(), st, q, res); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	// What was stored before validation, or by another daemon sharing
	// the store, is checked again as it is read: a failing lesson is
	// quarantined, never told.
	res = s.screen(res)
	if !req.Provenance.Empty() {
		kept := res[:0]
		for i := range res {
			if req.Provenance.Match(&res[i].Experience) && len(kept) < k {
				kept = append(kept, res[i])
			}
		}
		res = kept
	}
	if !noHit && len(res) > 0 {
		ids := make([]string, len(res))
		for i := range res {
			ids[i] = res[i].ID
		}
		s.hits.add(q.Namespace, ids, time.Now()) // written in the background (hitQueue)
	}
	if res == nil {
		res = []hindsight.ScoredExperience{}
	}
	writeJSON(w, http.StatusOK, res)
}

// withPinned puts q.Server's active pinned experiences first in res (see
// hindsight.Query.IncludePinned): those res holds keep their score, the
// others come with none.
func (s *Server) withPinned(ctx context.Context, st hindsight.ExperienceStore, q hindsight.Query, res []hindsight.ScoredExperience) ([]hindsight.ScoredExperience, error) {
	list, err := st.List(ctx, hindsight.ListOptions{Namespace: q.Namespace, Server: q.Server})
	if err != nil {
		return nil, fmt.Errorf("list pinned experiences: %w", err)
	}
	var pinned []hindsight.ScoredExperience
	ids := map[string]bool{}
	for _, e := range list {
		if e.Pinned && !e.Deleted && e.SupersededBy == "" && (q.Tool == "" || e.Tool == q.Tool) {
			pinned = append(pinned, hindsight.ScoredExperience{Experience: e})
			ids[e.ID] = true
		}
	}
	if len(pinned) == 0 {
		return res, nil
	}
	rest := make([]hindsight.ScoredExperience, 0, len(res))
	for _, e := range res {
		if ids[e.ID] {
			for i := range pinned {
				if pinned[i].ID == e.ID {
					pinned[i] = e
				}
			}
			continue
		}
		rest = append(rest, e)
	}
	return append(pinned, rest...), nil
}

// find returns the experience id: in the namespace asked for, else in the
// default one, else in any.
func (s *Server) find(ctx context.Context, st hindsight.ExperienceStore, ns, id string) (*hindsight.Experience, error) {
	e, err := st.Get(ctx, s.namespace(ns), id)
	if err == nil || ns != "" || !errors.Is(err, hindsight.ErrNotFound) {
		return e, err
	}
	all, lerr := st.List(ctx, hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true})
	if lerr != nil {
		return nil, lerr
	}
	for i := range all {
		if all[i].ID == id {
			return st.Get(ctx, all[i].Namespace, id)
		}
	}
	return nil, fmt.Errorf("experience %s: %w", id, hindsight.ErrNotFound)
}

func (s *Server) handleExperience(w http.ResponseWriter, r *http.Request) {
	st, err := s.store()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	e, err := s.find(r.Context(), st, r.URL.Query().Get("namespace"), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.hits.overlay(e)
	writeJSON(w, http.StatusOK, e)
}

func (s *Server) handleForget(w http.ResponseWriter, r *http.Request)  { s.setDeleted(w, r, true) }
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) { s.setDeleted(w, r, false) }

func (s *Server) setDeleted(w http.ResponseWriter, r *http.Request, deleted bool) {
	kind := OpRestore
	if deleted {
		kind = OpForget
	}
	s.storeWrite(w, r, StoreOp{Kind: kind, Namespace: r.URL.Query().Get("namespace"), IDs: []string{r.PathValue("id")}})
}

// maxLine bounds one experience in an import.
const maxLine = 4 << 20

// ParseExperiences reads experiences as JSON Lines (an export), skipping
// blank lines. Each needs an id and a lesson; the first bad line fails the
// whole file, naming its line number. It does not clean them: imports go
// through ParseImport.
func ParseExperiences(data []byte) ([]hindsight.Experience, error) {
	var list []hindsight.Experience
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e hindsight.Experience
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if e.ID == "" || strings.TrimSpace(e.Lesson) == "" {
			return nil, fmt.Errorf("line %d: an experience needs an id and a lesson", n)
		}
		if !traces.ValidID(e.ID) {
			return nil, fmt.Errorf("line %d: id %q may not contain '/' or NUL", n, e.ID)
		}
		list = append(list, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read experiences: %w", err)
	}
	return list, nil
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
