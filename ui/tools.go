package ui

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/hindsight-proxy/hindsight/toolpin"
)

// toolRow is one tool on the tools page.
type toolRow struct {
	Server      string
	Tool        *toolpin.Tool
	State       string
	Description string // the current version's, as stored
}

type toolsPage struct {
	Files []*toolpin.File
	Rows  []toolRow
	Error string
}

// handleTools shows every server's pinned tools (GET /v1/tools), those
// changed or flagged first.
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	files, err := s.Daemon.Tools(r.Context())
	if err != nil {
		s.fail(w, fmt.Errorf("list tools: %w", err))
		return
	}
	p := toolsPage{Files: files, Error: r.URL.Query().Get("error")}
	var pinned []toolRow
	for _, f := range files {
		for _, name := range f.Names() {
			t := f.Tools[name]
			row := toolRow{Server: f.Server, Tool: t, State: t.State()}
			for _, v := range t.Versions {
				if v.Hash == t.Current {
					row.Description = v.Description
				}
			}
			if row.State == toolpin.StatePinned {
				pinned = append(pinned, row)
			} else {
				p.Rows = append(p.Rows, row)
			}
		}
	}
	p.Rows = append(p.Rows, pinned...)
	s.render(w, r, "tools", "Tools", p)
}

// handleApproveTool pins the version of a tool last listed (POST
// /v1/tools/approve) and shows the tools again.
func (s *Server) handleApproveTool(w http.ResponseWriter, r *http.Request) {
	q := ""
	if _, err := s.Daemon.ApproveTool(r.Context(), r.PostFormValue("server"), r.PostFormValue("tool")); err != nil {
		q = "?error=" + url.QueryEscape(fmt.Sprintf("approve tool: %v", err))
	}
	http.Redirect(w, r, "/tools"+q, http.StatusSeeOther)
}
