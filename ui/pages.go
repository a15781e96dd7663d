package ui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/toolpin"
)

// Page bounds.
const (
	maxTasks       = 100 // tasks on the timeline
	maxTimeline    = 30  // of them, those drawn with their steps
	maxResults     = 100 // experiences listed or found
	maxInjections  = 50  // injection records shown for one experience
	rankCandidates = 50  // lessons ranked for a server's instructions
)

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"dur":   func(a, b time.Time) string { return b.Sub(a).Round(time.Millisecond).String() },
	"pct":   func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"short": toolpin.Short,
	"pretty": func(b json.RawMessage) string {
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") != nil {
			return string(b)
		}
		return out.String()
	},
	"join": strings.Join,
	"list": func(v ...string) []string { return v },
}

// parsePages parses each page with the layout.
func parsePages() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html"))
	pages := map[string]*template.Template{}
	for _, name := range []string{"tasks", "task", "experiences", "experience", "tools"} {
		pages[name] = template.Must(template.Must(base.Clone()).ParseFS(files, "templates/"+name+".html"))
	}
	return pages
}

// page is what every template receives.
type page struct {
	Title string
	CSRF  string // for forms: the browser session's (see session)
	Nav   string
	Data  any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	var buf bytes.Buffer
	var csrf string
	if sess, _ := r.Context().Value(sessionKey{}).(*session); sess != nil {
		csrf = sess.csrf
	}
	if err := s.pages[name].Execute(&buf, page{Title: title, CSRF: csrf, Nav: navOf(name), Data: data}); err != nil {
		s.Logger.Error("render page", "page", name, "err", err)
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

func navOf(name string) string {
	if name == "tools" {
		return "tools"
	}
	if strings.HasPrefix(name, "task") {
		return "tasks"
	}
	return "experiences"
}

// fail answers a daemon error with its status (404 stays 404).
func (s *Server) fail(w http.ResponseWriter, err error) {
	status := http.StatusBadGateway
	var ae *daemon.APIError
	if errors.As(err, &ae) {
		status = ae.Status
	}
	http.Error(w, err.Error(), status)
}

// --- tasks ---

type timelineTask struct {
	hindsight.Task
	Steps          []hindsight.Step // drawn on the timeline; nil past maxTimeline
	Redactions     int              // of Steps
	ErrorTemplates []string         // of Steps' failures, each once
}

func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request) {
	tasks, err := s.Daemon.Tasks(r.Context(), daemon.TaskFilter{Limit: maxTasks})
	if err != nil {
		s.fail(w, fmt.Errorf("list tasks: %w", err))
		return
	}
	out := make([]timelineTask, len(tasks))
	for i, t := range tasks {
		out[i].Task = t
		if i < maxTimeline {
			if full, err := s.Daemon.Task(r.Context(), t.ID); err == nil {
				out[i].Steps = full.Steps
				for _, st := range full.Steps {
					out[i].Redactions += st.Redactions
					if st.ErrorTemplate != "" && !slices.Contains(out[i].ErrorTemplates, st.ErrorTemplate) {
						out[i].ErrorTemplates = append(out[i].ErrorTemplates, st.ErrorTemplate)
					}
				}
			}
		}
	}
	s.render(w, r, "tasks", "Tasks", out)
}

type taskPage struct {
	*hindsight.Task
	Redactions int
}

func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	t, err := s.Daemon.Task(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, fmt.Errorf("read task: %w", err))
		return
	}
	p := taskPage{Task: t}
	for _, st := range t.Steps {
		p.Redactions += st.Redactions
	}
	s.render(w, r, "task", "Task "+t.ID, p)
}

// --- experiences ---

// filter is the experiences page's form.
type filter struct {
	Q, Server, Tool, Origin string
	MinConfidence           float64
	MinEvidence             int
	Deleted                 bool
}

func readFilter(r *http.Request) filter {
	q := r.URL.Query()
	f := filter{Q: strings.TrimSpace(q.Get("q")), Server: q.Get("server"), Tool: q.Get("tool"), Origin: q.Get("origin"),
		Deleted: q.Get("deleted") != ""}
	f.MinConfidence, _ = strconv.ParseFloat(q.Get("min_confidence"), 64)
	f.MinEvidence, _ = strconv.Atoi(q.Get("min_evidence"))
	return f
}

type experiencesPage struct {
	Filter  filter
	Results []hindsight.ScoredExperience
	Search  bool // Results carry scores
}

func (s *Server) handleExperiences(w http.ResponseWriter, r *http.Request) {
	f := readFilter(r)
	var res []hindsight.ScoredExperience
	if f.Q != "" {
		found, err := s.Daemon.SearchBy(r.Context(), daemon.SearchRequest{
			Query: hindsight.Query{Text: f.Q, Server: f.Server, Tool: f.Tool, K: maxResults, Explain: true, NoHit: true,
				IncludeDeleted: f.Deleted, IncludeCold: true},
			Provenance: daemon.Provenance{Origin: f.Origin}})
		if err != nil {
			s.fail(w, fmt.Errorf("search experiences: %w", err))
			return
		}
		res = found
	} else {
		list, err := s.Daemon.ExperiencesBy(r.Context(), hindsight.ListOptions{Server: f.Server, Tool: f.Tool, IncludeDeleted: f.Deleted},
			daemon.Provenance{Origin: f.Origin})
		if err != nil {
			s.fail(w, fmt.Errorf("list experiences: %w", err))
			return
		}
		for _, e := range list {
			res = append(res, hindsight.ScoredExperience{Experience: e})
		}
	}
	kept := res[:0]
	for _, e := range res {
		if e.Confidence >= f.MinConfidence && e.EvidenceCount >= f.MinEvidence && len(kept) < maxResults {
			kept = append(kept, e)
		}
	}
	s.render(w, r, "experiences", "Experiences", experiencesPage{Filter: f, Results: kept, Search: f.Q != ""})
}

// injection is one step that showed an experience to an agent.
type injection struct {
	TaskID    string
	StepIndex int
	Server    string
	At        time.Time
	Channel   string
}

type experiencePage struct {
	E          *hindsight.Experience
	Query      string
	Explained  *hindsight.ScoredExperience // its score for Query, or for its server's instructions
	Rank       int                         // 1-based rank there; 0: not ranked
	Injections []injection
	More       bool // more injections than shown
	Error      string
}

func (s *Server) experience(ctx context.Context, r *http.Request) (*hindsight.Experience, error) {
	return s.Daemon.Experience(ctx, r.URL.Query().Get("ns"), r.PathValue("id"))
}

func (s *Server) handleExperience(w http.ResponseWriter, r *http.Request) {
	e, err := s.experience(r.Context(), r)
	if err != nil {
		s.fail(w, fmt.Errorf("read experience: %w", err))
		return
	}
	p := experiencePage{E: e, Query: r.URL.Query().Get("q"), Error: r.URL.Query().Get("error")}
	// Its score for the query the person searched, or else as the
	// sidecar ranks its server's lessons for the instructions.
	q := hindsight.Query{Text: p.Query, Namespace: e.Namespace, Server: e.Server, K: rankCandidates,
		Explain: true, NoHit: true, IncludeCold: true, IncludeDeleted: e.Deleted, IncludeSuperseded: e.SupersededBy != ""}
	if p.Query != "" {
		q.Server = ""
	}
	if found, err := s.Daemon.Search(r.Context(), q); err == nil {
		for i := range found {
			if found[i].ID == e.ID {
				p.Explained, p.Rank = &found[i], i+1
				break
			}
		}
	}
	p.Injections, p.More, err = s.injections(r.Context(), e.ID)
	if err != nil {
		p.Error = "injections: " + err.Error()
	}
	s.render(w, r, "experience", "Experience "+e.ID, p)
}

// injections scans the recorded steps for those that showed the experience
// id, newest first, at most maxInjections.
func (s *Server) injections(ctx context.Context, id string) ([]injection, bool, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(s.Daemon.Export(ctx, pw)) }()
	defer pr.Close()
	needle := []byte(strconv.Quote(id))
	var out []injection
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, needle) {
			continue
		}
		var st hindsight.Step
		if json.Unmarshal(line, &st) != nil {
			continue
		}
		for _, inj := range st.Injected {
			if slices.Contains(inj.ExperienceIDs, id) {
				out = append(out, injection{TaskID: st.TaskID, StepIndex: st.StepIndex, Server: st.Server, At: st.StartedAt, Channel: inj.Channel})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("read steps: %w", err)
	}
	slices.Reverse(out)
	more := len(out) > maxInjections
	if more {
		out = out[:maxInjections]
	}
	return out, more, nil
}

// back redirects to the experience's page, with a message when err is set.
func back(w http.ResponseWriter, r *http.Request, e *hindsight.Experience, id string, err error) {
	q := url.Values{}
	if e != nil {
		q.Set("ns", e.Namespace)
	}
	if err != nil {
		q.Set("error", err.Error())
	}
	http.Redirect(w, r, "/experiences/"+url.PathEscape(id)+"?"+q.Encode(), http.StatusSeeOther)
}

func (s *Server) handleEdit(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	version, err := strconv.Atoi(r.PostFormValue("version"))
	if err != nil {
		http.Error(w, "edit: version: not a number", http.StatusBadRequest)
		return
	}
	req := daemon.EditRequest{Namespace: r.PostFormValue("ns"), Version: version}
	for _, f := range []struct {
		name string
		dst  **string
	}{{"situation", &req.Situation}, {"action", &req.Action}, {"result", &req.Result}, {"lesson", &req.Lesson}} {
		if v, ok := r.PostForm[f.name]; ok {
			*f.dst = &v[0]
		}
	}
	if v := r.PostFormValue("confidence"); v != "" {
		c, err := strconv.ParseFloat(v, 64)
		if err != nil {
			http.Error(w, "edit: confidence: not a number", http.StatusBadRequest)
			return
		}
		req.Confidence = &c
	}
	e, err := s.Daemon.Edit(r.Context(), id, req)
	if err != nil {
		back(w, r, &hindsight.Experience{Namespace: req.Namespace}, id, fmt.Errorf("edit experience: %w", err))
		return
	}
	back(w, r, e, id, nil)
}

func (s *Server) handleForget(w http.ResponseWriter, r *http.Request) {
	e, err := s.Daemon.Forget(r.Context(), r.PostFormValue("ns"), r.PathValue("id"))
	if err != nil {
		err = fmt.Errorf("forget experience: %w", err)
	}
	back(w, r, e, r.PathValue("id"), err)
}

func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) {
	e, err := s.Daemon.Restore(r.Context(), r.PostFormValue("ns"), r.PathValue("id"))
	if err != nil {
		err = fmt.Errorf("restore experience: %w", err)
	}
	back(w, r, e, r.PathValue("id"), err)
}

func (s *Server) handlePin(w http.ResponseWriter, r *http.Request) {
	e, err := s.Daemon.Pin(r.Context(), r.PostFormValue("ns"), r.PathValue("id"), r.PostFormValue("pinned") == "1")
	if err != nil {
		err = fmt.Errorf("pin experience: %w", err)
	}
	back(w, r, e, r.PathValue("id"), err)
}

func (s *Server) handlePurge(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.Daemon.PurgeExperiences(r.Context(), r.PostFormValue("ns"), []string{id}); err != nil {
		back(w, r, nil, id, fmt.Errorf("purge experience: %w", err))
		return
	}
	http.Redirect(w, r, "/experiences?purged="+url.QueryEscape(id), http.StatusSeeOther)
}
