package corpus

import (
	"fmt"
	"path"
	"strings"
)

// The repo server: a git code host. Its workflows: change a file on a new
// branch, open a pull request and run CI; or try to change an archived
// repository and give up.

const repoTools = `[
{"name":"search_code","description":"Search a repository's default branch for text. Rate limited; pass pause_ms to space out calls.","inputSchema":{"type":"object","properties":{"repo":{"type":"string","description":"owner/name"},"query":{"type":"string"},"pause_ms":{"type":"integer","minimum":0,"maximum":10000}},"required":["repo","query"]}},
{"name":"get_file","description":"Read a file at a ref.","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"path":{"type":"string"},"ref":{"type":"string","default":"main"}},"required":["repo","path"]}},
{"name":"create_branch","description":"Create a branch from another branch or commit.","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"name":{"type":"string"},"from":{"type":"string","default":"main"}},"required":["repo","name"]}},
{"name":"commit_file","description":"Create or replace one file on a branch in a new commit.","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"branch":{"type":"string"},"path":{"type":"string"},"content":{"type":"string"},"message":{"type":"string"}},"required":["repo","branch","path","content","message"]}},
{"name":"open_pull_request","description":"Open a pull request from head into base.","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"head":{"type":"string"},"base":{"type":"string","default":"main"},"title":{"type":"string"},"body":{"type":"string"},"draft":{"type":"boolean"}},"required":["repo","head","base","title"]}},
{"name":"run_ci","description":"Start a CI workflow on a ref.","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"ref":{"type":"string"},"workflow":{"type":"string","enum":["test","lint","build"]}},"required":["repo","ref"]}},
{"name":"get_ci_status","description":"Get the status of a CI run.","inputSchema":{"type":"object","properties":{"run_id":{"type":"integer"}},"required":["run_id"]}},
{"name":"auth_refresh","description":"Refresh the server's access token for the code host.","inputSchema":{"type":"object","properties":{}}},
{"name":"think","description":"Record a thought. No side effects.","inputSchema":{"type":"object","properties":{"thought":{"type":"string"}},"required":["thought"]}}
]`

var orgs = []string{"northwind", "bluefinch", "tallgrass", "copperleaf", "quietharbor", "ironbark", "saltmarsh", "redkite"}
var services = []string{"invoice-svc", "ledger", "notifier", "search-api", "checkout-web", "pricing", "inventory", "auth-gateway",
	"report-builder", "shipping-rates", "feature-flags", "audit-log", "image-resizer", "payments-core"}
var codeDirs = []string{"internal/billing", "pkg/retry", "cmd/server", "internal/store", "pkg/money", "internal/api", "pkg/tz", "internal/queue", "internal/mail", "pkg/config"}
var codeFiles = []string{"rounding", "handler", "client", "backoff", "limits", "parse", "format", "cache", "worker", "validate", "schedule", "export"}
var changes = []struct{ slug, query, title string }{
	{"invoice-rounding", "RoundHalfUp", "Round invoice totals half-even"},
	{"retry-jitter", "backoff.Next", "Add jitter to retry backoff"},
	{"utc-cutoff", "time.Local", "Use UTC for the daily cutoff"},
	{"nil-config", "cfg.Timeout", "Handle a nil timeout in config"},
	{"dedupe-mails", "SendBatch", "Deduplicate notification e-mails"},
	{"cache-ttl", "ttlSeconds", "Make the cache TTL configurable"},
	{"limit-page-size", "pageSize", "Cap the page size at 200"},
	{"trim-sku", "strings.TrimSpace", "Trim whitespace from SKUs"},
}

type repoCase struct {
	repo, path, branch, query, title string
	content                          string
}

func (t *task) newRepoCase(archived bool) *repoCase {
	g := t.g
	ch := changes[g.r.IntN(len(changes))]
	c := &repoCase{query: ch.query, title: ch.title}
	c.repo = g.fresh(func() string {
		name := g.pick(services)
		if archived {
			name = "legacy-" + name
		}
		return g.pick(orgs) + "/" + name
	})
	c.path = g.fresh(func() string { return g.pick(codeDirs) + "/" + g.pick(codeFiles) + ".go" })
	c.branch = g.fresh(func() string {
		return g.pick([]string{"feature/", "fix/", "chore/"}) + ch.slug + fmt.Sprintf("-%d", g.between(100, 9999))
	})
	pkg := path.Base(path.Dir(c.path))
	c.content = fmt.Sprintf("package %s\n\n// %s is called from %d places.\nfunc %s(v int) int {\n\treturn v\n}\n", pkg, ch.query, g.between(2, 9), strings.ReplaceAll(strings.ReplaceAll(ch.query, ".", ""), " ", ""))
	return c
}

func (t *task) searchResult(c *repoCase) map[string]any {
	return map[string]any{"total_count": 1, "items": []map[string]any{{"path": c.path, "line": t.g.between(12, 340), "snippet": c.query + "(v)"}}}
}

func (t *task) fileResult(c *repoCase) map[string]any {
	return map[string]any{"path": c.path, "ref": "main", "sha": t.g.hex(12), "content": c.content}
}

func (t *task) repoFlow(specs map[string]bool) {
	g := t.g
	c := t.newRepoCase(false)

	search := map[string]any{"repo": c.repo, "query": c.query}
	if specs[ClassRateLimited] {
		ms := g.between(2, 30) * 100
		f := t.fail("repo", "search_code", search, fmt.Sprintf("429 Too Many Requests: secondary rate limit exceeded; retry after %d ms or pass pause_ms", ms))
		s := t.ok("repo", "search_code", map[string]any{"repo": c.repo, "query": c.query, "pause_ms": ms}, t.searchResult(c))
		if g.chance(0.4) {
			s.thought = fmt.Sprintf("Rate limited. The error suggests pause_ms=%d.", ms)
		}
		t.episode(ClassRateLimited, s, f)
	} else {
		t.do("repo", "search_code", search, t.searchResult(c))
	}
	t.do("repo", "get_file", map[string]any{"repo": c.repo, "path": c.path, "ref": "main"}, t.fileResult(c))

	number := g.between(12, 2400)
	pr := map[string]any{"repo": c.repo, "head": c.branch, "base": "main", "title": c.title,
		"body": fmt.Sprintf("%s in `%s`.", c.title, c.path)}
	prResult := map[string]any{"number": number, "state": "open", "url": fmt.Sprintf("https://git.example.com/%s/pull/%d", c.repo, number)}
	branch := map[string]any{"repo": c.repo, "name": c.branch, "from": "main"}
	branchResult := map[string]any{"ref": "refs/heads/" + c.branch, "sha": g.hex(40)}
	commit := map[string]any{"repo": c.repo, "branch": c.branch, "path": c.path,
		"content": strings.Replace(c.content, "return v", "return v + 0", 1), "message": c.title}
	commitResult := map[string]any{"commit": g.hex(40), "branch": c.branch}
	if specs[ClassBranchMissing] {
		// A draft pull request first, on a branch the agent never made.
		pr["draft"] = true
		prResult["draft"] = true
		f := t.fail("repo", "open_pull_request", pr, fmt.Sprintf("422 Unprocessable Entity: head branch '%s' does not exist; create it first", c.branch))
		t.ok("repo", "create_branch", branch, branchResult)
		s := t.ok("repo", "open_pull_request", pr, prResult)
		t.episode(ClassBranchMissing, s, f)
		t.do("repo", "commit_file", commit, commitResult)
	} else {
		t.ok("repo", "create_branch", branch, branchResult)
		t.do("repo", "commit_file", commit, commitResult)
		t.ok("repo", "open_pull_request", pr, prResult)
	}
	runID := g.between(100000000, 999999999)
	t.do("repo", "run_ci", map[string]any{"repo": c.repo, "ref": c.branch, "workflow": g.pick([]string{"test", "lint", "build"})},
		map[string]any{"run_id": runID, "status": "queued"})
	if g.chance(0.7) {
		t.ok("repo", "get_ci_status", map[string]any{"run_id": runID},
			map[string]any{"run_id": runID, "status": "completed", "conclusion": "success", "duration_s": g.between(40, 900)})
	}
}

// archivedRepoFlow: the agent tries to branch off (and perhaps commit to)
// an archived repository; every write fails and it gives up.
func (t *task) archivedRepoFlow() {
	g := t.g
	c := t.newRepoCase(true)
	t.do("repo", "search_code", map[string]any{"repo": c.repo, "query": c.query}, t.searchResult(c))
	t.do("repo", "get_file", map[string]any{"repo": c.repo, "path": c.path, "ref": "main"}, t.fileResult(c))
	text := fmt.Sprintf("permission denied: repository %s is archived and read-only", c.repo)
	fails := []*call{t.fail("repo", "create_branch", map[string]any{"repo": c.repo, "name": c.branch, "from": "main"}, text)}
	other := c.branch + "-" + g.pick([]string{"v2", "retry", "b"})
	fails = append(fails, t.fail("repo", "create_branch", map[string]any{"repo": c.repo, "name": other}, text))
	if g.chance(0.5) {
		fails = append(fails, t.fail("repo", "commit_file", map[string]any{"repo": c.repo, "branch": "main", "path": c.path,
			"content": c.content, "message": c.title}, text))
	}
	t.episode(ClassRepoArchived, nil, fails...)
}
