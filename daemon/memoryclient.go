package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hindsight-proxy/hindsight"
)

// The client's calls to the daemon's memory service (package memory):
// experiences listed, searched, read, written, imported and exported.

func listQuery(opt hindsight.ListOptions) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("namespace", opt.Namespace)
	set("server", opt.Server)
	set("tool", opt.Tool)
	if opt.IncludeDeleted {
		q.Set("deleted", "true")
	}
	if opt.IncludeSuperseded {
		q.Set("superseded", "true")
	}
	if opt.Limit > 0 {
		q.Set("limit", strconv.Itoa(opt.Limit))
	}
	return q
}

// Experiences lists experiences.
func (c *Client) Experiences(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	return c.ExperiencesBy(ctx, opt, Provenance{})
}

// ExperiencesBy is Experiences, keeping those p selects.
func (c *Client) ExperiencesBy(ctx context.Context, opt hindsight.ListOptions, p Provenance) ([]hindsight.Experience, error) {
	var list []hindsight.Experience
	q := listQuery(opt)
	if p.Origin != "" {
		q.Set("origin", p.Origin)
	}
	if p.SourceAgent != "" {
		q.Set("agent", p.SourceAgent)
	}
	if p.SourceMachine != "" {
		q.Set("machine", p.SourceMachine)
	}
	err := c.call(ctx, http.MethodGet, "/experiences", q, nil, &list)
	return list, err
}

// Search asks which experiences matter for q, best first. It counts as a
// hit on each unless q.NoHit.
func (c *Client) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	var res []hindsight.ScoredExperience
	err := c.call(ctx, http.MethodPost, "/experiences/search", nil, q, &res)
	return res, err
}

// SearchBy is Search, keeping the results req.Provenance selects (up to
// req.K of them).
func (c *Client) SearchBy(ctx context.Context, req SearchRequest) ([]hindsight.ScoredExperience, error) {
	var res []hindsight.ScoredExperience
	err := c.call(ctx, http.MethodPost, "/experiences/search", nil, req, &res)
	return res, err
}

func nsQuery(ns string) url.Values {
	if ns == "" {
		return nil
	}
	return url.Values{"namespace": {ns}}
}

// Experience returns one experience. An empty namespace looks in the
// default one, then in all.
func (c *Client) Experience(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	return c.experience(ctx, http.MethodGet, "/experiences/"+url.PathEscape(id), nsQuery(namespace), nil)
}

// Forget soft-deletes an experience and returns it.
func (c *Client) Forget(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	return c.experience(ctx, http.MethodPost, "/experiences/"+url.PathEscape(id)+"/forget", nsQuery(namespace), nil)
}

// Restore undoes Forget and returns the experience.
func (c *Client) Restore(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	return c.experience(ctx, http.MethodPost, "/experiences/"+url.PathEscape(id)+"/restore", nsQuery(namespace), nil)
}

// Import sends experiences as JSON Lines, imported under the default
// ImportOptions (see ImportWith).
func (c *Client) Import(ctx context.Context, r io.Reader) (ImportResult, error) {
	return c.ImportWith(ctx, r, ImportOptions{})
}

// ImportWith sends experiences as JSON Lines; the daemon cleans them (see
// CleanImport) under opt.
func (c *Client) ImportWith(ctx context.Context, r io.Reader, opt ImportOptions) (ImportResult, error) {
	var res ImportResult
	q := url.Values{}
	if opt.Namespace != "" {
		q.Set("namespace", opt.Namespace)
	}
	if opt.Pack != "" {
		q.Set("pack", opt.Pack)
	}
	if opt.Trust {
		q.Set("trust", "true")
	}
	resp, err := c.do(ctx, http.MethodPost, "/experiences/import", q, r, "application/jsonl")
	if err != nil {
		return res, err
	}
	return res, decodeAnswer(resp, &res)
}

// ExportExperiences copies experiences to w as JSON Lines.
func (c *Client) ExportExperiences(ctx context.Context, w io.Writer, opt hindsight.ListOptions) error {
	resp, err := c.do(ctx, http.MethodGet, "/experiences/export", listQuery(opt), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("export experiences: %w", err)
	}
	return nil
}

// Edit stores a person's edit of an experience as its next version and
// returns it.
func (c *Client) Edit(ctx context.Context, id string, req EditRequest) (*hindsight.Experience, error) {
	return c.experience(ctx, http.MethodPost, "/experiences/"+url.PathEscape(id)+"/edit", nil, req)
}

// Pin pins (or unpins) an experience and returns it.
func (c *Client) Pin(ctx context.Context, namespace, id string, pinned bool) (*hindsight.Experience, error) {
	return c.experience(ctx, http.MethodPost, "/experiences/"+url.PathEscape(id)+"/pin", nil, PinRequest{Namespace: namespace, Pinned: pinned})
}

// Rejected lists the latest lessons reflection refused, newest first.
func (c *Client) Rejected(ctx context.Context, limit int) ([]Rejection, error) {
	var list []Rejection
	q := make(map[string][]string)
	if limit > 0 {
		q["limit"] = []string{strconv.Itoa(limit)}
	}
	err := c.call(ctx, http.MethodGet, "/experiences/rejected", q, nil, &list)
	return list, err
}

// experience makes a call whose answer is an experience.
func (c *Client) experience(ctx context.Context, method, path string, q url.Values, in any) (*hindsight.Experience, error) {
	var e hindsight.Experience
	if err := c.call(ctx, method, path, q, in, &e); err != nil {
		return nil, err
	}
	return &e, nil
}
