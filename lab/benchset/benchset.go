// Package benchset generates Hindsight's retrieval benchmarks: sets of
// experiences with hard distractors and labelled queries, committed as
// JSONL in store/testdata/retrieval (regenerate with
// `go test ./store/embedded -run TestRetrievalData -update`). There are two
// sets: the main one (Generate, described here) and the hard-negative one
// (GenerateHard, see hard.go), whose distractors share tool and situation
// and differ only in the error.
//
// Each case is a target experience (a tool, an error, an object such as a
// file or a branch, a project, and the lesson that fixed it) plus four
// distractors built to confuse retrieval:
//
//   - same tool, same object and project, another error;
//   - same error, same object and project, another tool of the server;
//   - a stale lesson for the very same situation, superseded by the target;
//   - the same tool and error in another project on another object
//     (a near-paraphrase that only the object and project tell apart).
//
// One case in eight is written in Chinese (object names stay as they are).
// Each query paraphrases its target's situation with other verbs and
// another wording of the error message, as an agent would describe it, and
// carries the filters the sidecar knows at that point (server, tool, error
// code). Generation is deterministic (fixed PCG seed).
package benchset

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// RefTime is "now" for the benchmark: experiences were created in the 60
// days before it. Searches must run with this clock so that scores do not
// drift with the calendar.
var RefTime = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// Query is a labelled benchmark query.
type Query struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	Server    string `json:"server"`
	Tool      string `json:"tool"`
	ErrorCode string `json:"error_code"`
	// ErrorTemplate is the template the sidecar would compute from the
	// query's error (Mask); "" when the query carries none.
	ErrorTemplate string `json:"error_template,omitempty"`
	Want          string `json:"want"` // id of the experience that answers it
	// Relevant are all the experiences that answer it, Want among them
	// (empty: Want alone).
	Relevant []string `json:"relevant,omitempty"`
	Lang     string   `json:"lang"` // "en" or "zh"
}

type errorKind struct {
	code   string
	msgs   []string // wordings of the error message; experiences use one, queries another
	msgsZh []string
	remedy string // what fixes it, with %s for the object
	zh     string // the remedy in Chinese, with %s for the object
}

type server struct {
	name    string
	tools   []string
	verbs   map[string][2]string // tool → two ways to say what the agent did
	verbsZh map[string][2]string
	objects []string
	errors  []string // codes that occur on this server
}

var errorKinds = map[string]errorKind{
	"ENOENT": {"ENOENT", []string{"no such file or directory", "the path does not exist", "file not found"},
		[]string{"文件不存在", "找不到该路径"}, "list the parent directory first and use the exact existing name of %s", "先列出上级目录，确认 %s 的准确名称后再重试"},
	"EACCES": {"EACCES", []string{"permission denied", "access is not allowed outside the sandbox", "operation not permitted by the allowed roots"},
		[]string{"权限被拒绝", "不允许访问该路径"}, "stay inside the allowed roots and copy %s into the workspace before touching it", "只在允许的根目录内操作，先把 %s 复制到工作区"},
	"EISDIR": {"EISDIR", []string{"is a directory", "expected a file but found a directory", "illegal operation on a directory"},
		[]string{"目标是一个目录", "期望文件却得到目录"}, "append the file name to %s instead of passing the folder", "在 %s 后面补上具体文件名，不要传目录"},
	"EEXIST": {"EEXIST", []string{"file already exists", "destination exists", "target path is already present"},
		[]string{"文件已存在", "目标路径已经存在"}, "check whether %s exists and pass overwrite explicitly", "先检查 %s 是否存在，再显式指定覆盖"},
	"ETIMEDOUT": {"ETIMEDOUT", []string{"operation timed out", "request took too long and was aborted", "deadline exceeded"},
		[]string{"操作超时", "请求耗时过长被中止"}, "split the work on %s into smaller chunks and raise the timeout", "把对 %s 的操作拆成小块并调大超时"},
	"429": {"429", []string{"429 Too Many Requests", "rate limit exceeded", "you are being rate limited"},
		[]string{"请求过多被限流", "超出速率限制"}, "wait for the Retry-After header before calling %s again", "等待 Retry-After 指定的时间后再请求 %s"},
	"401": {"401", []string{"401 Unauthorized", "authentication required", "bad credentials"},
		[]string{"未授权", "凭据无效"}, "refresh the token for %s from the credential helper", "通过凭据助手刷新 %s 的令牌"},
	"403": {"403", []string{"403 Forbidden", "resource not accessible by integration", "insufficient scope"},
		[]string{"禁止访问", "权限范围不足"}, "use the deploy key that has write scope on %s", "使用对 %s 有写权限的部署密钥"},
	"404": {"404", []string{"404 Not Found", "the resource could not be found", "no such endpoint"},
		[]string{"资源不存在", "找不到该资源"}, "resolve the canonical address of %s before requesting it", "先解析 %s 的规范地址再请求"},
	"409": {"409", []string{"409 Conflict", "the resource was modified concurrently", "conflicting update"},
		[]string{"发生冲突", "资源被并发修改"}, "fetch the latest version of %s and reapply the change", "先获取 %s 的最新版本再重新应用修改"},
	"422": {"422", []string{"422 Unprocessable Entity", "validation failed", "invalid field value"},
		[]string{"参数校验失败", "字段取值无效"}, "validate the fields for %s against the schema before sending", "发送前按照模式校验 %s 的字段"},
	"500": {"500", []string{"500 Internal Server Error", "upstream crashed", "unexpected server failure"},
		[]string{"服务器内部错误", "上游服务崩溃"}, "retry %s once with backoff and then report the request id", "对 %s 退避重试一次，再上报请求编号"},
	"42P01": {"42P01", []string{"relation does not exist", "undefined table", "no such table"},
		[]string{"表不存在", "未定义的表"}, "qualify %s with its schema name and check the migration ran", "给 %s 加上模式名并确认迁移已执行"},
	"23505": {"23505", []string{"duplicate key value violates unique constraint", "unique violation", "key already exists"},
		[]string{"唯一约束冲突", "主键重复"}, "upsert into %s with ON CONFLICT instead of a plain insert", "对 %s 使用 ON CONFLICT 的 upsert 代替普通插入"},
	"40001": {"40001", []string{"could not serialize access due to concurrent update", "serialization failure", "transaction conflict"},
		[]string{"并发更新导致无法串行化", "事务冲突"}, "retry the transaction on %s from the start", "从头重试针对 %s 的事务"},
	"NONFF": {"non-fast-forward", []string{"rejected non-fast-forward", "updates were rejected because the tip is behind", "remote contains work you do not have"},
		[]string{"非快进被拒绝", "远端包含本地没有的提交"}, "pull with rebase onto %s before pushing", "推送前先在 %s 上 rebase 拉取"},
	"MERGE": {"merge-conflict", []string{"merge conflict", "automatic merge failed", "conflicting changes in the working tree"},
		[]string{"合并冲突", "自动合并失败"}, "stash local edits, update %s and resolve conflicts file by file", "暂存本地修改，更新 %s 后逐个文件解决冲突"},
	"EXIT1": {"exit-1", []string{"command exited with status 1", "non-zero exit code", "process failed"},
		[]string{"命令退出码为 1", "进程执行失败"}, "run %s with verbose output and read stderr before retrying", "用详细输出运行 %s 并先阅读标准错误"},
	"OOM": {"OOMKilled", []string{"container was OOMKilled", "out of memory", "memory limit exceeded"},
		[]string{"容器因内存不足被杀", "超出内存限制"}, "raise the memory limit of %s and cap the worker count", "提高 %s 的内存上限并限制工作进程数"},
	"SELECTOR": {"selector-not-found", []string{"element not found", "no node matches the selector", "timeout waiting for selector"},
		[]string{"找不到元素", "选择器没有匹配的节点"}, "wait for %s to be visible and use a data-testid selector", "等待 %s 可见后再使用 data-testid 选择器"},
	"-32602": {"-32602", []string{"invalid params", "argument missing or of the wrong type", "schema validation error on arguments"},
		[]string{"参数无效", "参数缺失或类型错误"}, "send every required argument of %s with the types from the tool schema", "按工具模式的类型传齐 %s 的所有必填参数"},
}

var servers = []server{
	{name: "filesystem", tools: []string{"read_file", "write_file", "list_directory", "move_file", "edit_file", "search_files"},
		verbs: map[string][2]string{
			"read_file": {"reading", "opening"}, "write_file": {"writing", "saving"}, "list_directory": {"listing", "enumerating"},
			"move_file": {"moving", "renaming"}, "edit_file": {"editing", "patching"}, "search_files": {"searching", "grepping through"}},
		verbsZh: map[string][2]string{
			"read_file": {"读取", "打开"}, "write_file": {"写入", "保存"}, "list_directory": {"列出", "浏览"},
			"move_file": {"移动", "重命名"}, "edit_file": {"编辑", "修改"}, "search_files": {"搜索", "查找"}},
		objects: []string{"config/settings.yaml", "src/main.go", "docs/README.md", "data/users.csv", "scripts/deploy.sh",
			"internal/auth/token.go", "web/package.json", "migrations/0042_orders.sql", "assets/logo.svg", ".env.example",
			"tests/fixtures/payload.json", "charts/values.yaml", "cmd/server/flags.go", "notebooks/analysis.ipynb", "Makefile"},
		errors: []string{"ENOENT", "EACCES", "EISDIR", "EEXIST", "ETIMEDOUT", "-32602"}},
	{name: "git", tools: []string{"git_commit", "git_push", "git_checkout", "git_pull"},
		verbs: map[string][2]string{
			"git_commit": {"committing", "recording a commit on"}, "git_push": {"pushing", "publishing"},
			"git_checkout": {"checking out", "switching to"}, "git_pull": {"pulling", "syncing"}},
		verbsZh: map[string][2]string{
			"git_commit": {"提交", "记录提交到"}, "git_push": {"推送", "发布"}, "git_checkout": {"检出", "切换到"}, "git_pull": {"拉取", "同步"}},
		objects: []string{"branch main", "branch release/2.3", "branch feature/login-rate-limit", "remote origin", "remote upstream",
			"tag v1.8.0", "branch hotfix/tls-renewal", "submodule vendor/protos", "branch docs/api-guide", "branch chore/bump-deps"},
		errors: []string{"NONFF", "MERGE", "403", "401", "EXIT1", "ETIMEDOUT"}},
	{name: "http", tools: []string{"fetch", "post_json", "download"},
		verbs: map[string][2]string{
			"fetch": {"fetching", "requesting"}, "post_json": {"posting JSON to", "sending a payload to"}, "download": {"downloading", "pulling the file from"}},
		verbsZh: map[string][2]string{
			"fetch": {"获取", "请求"}, "post_json": {"提交 JSON 到", "发送数据到"}, "download": {"下载", "拉取文件自"}},
		objects: []string{"api.example.com/v2/orders", "status page feed", "billing webhook endpoint", "search API /v1/query",
			"weather service forecast", "CDN asset bundle", "OAuth token endpoint", "pricing catalogue export", "geo lookup service", "S3 presigned URL"},
		errors: []string{"429", "401", "403", "404", "500", "ETIMEDOUT", "422"}},
	{name: "postgres", tools: []string{"query", "execute", "migrate"},
		verbs: map[string][2]string{
			"query": {"querying", "selecting from"}, "execute": {"inserting into", "updating"}, "migrate": {"migrating", "altering"}},
		verbsZh: map[string][2]string{"query": {"查询", "检索"}, "execute": {"插入", "更新"}, "migrate": {"迁移", "修改结构"}},
		objects: []string{"table orders", "table customers", "table invoices", "view monthly_revenue", "table audit_log",
			"table feature_flags", "table sessions", "table shipments", "materialized view top_products", "table payouts"},
		errors: []string{"42P01", "23505", "40001", "ETIMEDOUT", "EACCES", "-32602"}},
	{name: "github", tools: []string{"create_pull_request", "create_issue", "merge_pull_request", "add_comment"},
		verbs: map[string][2]string{
			"create_pull_request": {"opening a pull request on", "proposing a change to"}, "create_issue": {"filing an issue on", "reporting a bug in"},
			"merge_pull_request": {"merging a pull request into", "landing a change on"}, "add_comment": {"commenting on", "replying in"}},
		verbsZh: map[string][2]string{
			"create_pull_request": {"创建拉取请求到", "提交变更到"}, "create_issue": {"创建问题到", "报告缺陷到"},
			"merge_pull_request": {"合并拉取请求到", "合入变更到"}, "add_comment": {"评论", "回复"}},
		objects: []string{"repo acme/payments", "repo acme/web", "repo acme/infra", "repo acme/mobile", "repo acme/docs",
			"repo acme/ml-models", "repo acme/cli", "repo acme/sdk-go"},
		errors: []string{"403", "401", "404", "409", "422", "429"}},
	{name: "shell", tools: []string{"run_command", "run_script"},
		verbs:   map[string][2]string{"run_command": {"running", "executing"}, "run_script": {"launching the script", "invoking"}},
		verbsZh: map[string][2]string{"run_command": {"运行", "执行"}, "run_script": {"启动脚本", "调用"}},
		objects: []string{"npm test", "go build ./...", "make release", "pytest -x", "docker compose up", "terraform plan",
			"cargo clippy", "yarn lint", "bundle exec rspec", "gradle assemble"},
		errors: []string{"EXIT1", "ETIMEDOUT", "OOM", "EACCES", "ENOENT"}},
	{name: "kubernetes", tools: []string{"kubectl_apply", "kubectl_logs", "kubectl_rollout"},
		verbs: map[string][2]string{
			"kubectl_apply": {"applying manifests for", "deploying"}, "kubectl_logs": {"reading logs of", "tailing"},
			"kubectl_rollout": {"rolling out", "restarting"}},
		verbsZh: map[string][2]string{"kubectl_apply": {"应用清单到", "部署"}, "kubectl_logs": {"读取日志", "跟踪日志"}, "kubectl_rollout": {"滚动发布", "重启"}},
		objects: []string{"deployment checkout-api", "deployment search-indexer", "statefulset redis", "cronjob nightly-report",
			"deployment auth-gateway", "daemonset log-shipper", "deployment image-resizer", "job db-backfill"},
		errors: []string{"OOM", "403", "404", "409", "ETIMEDOUT", "422"}},
	{name: "browser", tools: []string{"navigate", "click", "fill_form", "screenshot"},
		verbs: map[string][2]string{
			"navigate": {"navigating to", "loading"}, "click": {"clicking", "pressing"}, "fill_form": {"filling in", "typing into"},
			"screenshot": {"capturing", "taking a screenshot of"}},
		verbsZh: map[string][2]string{"navigate": {"打开页面", "加载"}, "click": {"点击", "按下"}, "fill_form": {"填写", "输入"}, "screenshot": {"截取", "截图"}},
		objects: []string{"login button", "checkout form", "search box", "cookie banner", "pricing page", "settings modal",
			"signup wizard", "dashboard chart", "file upload field", "dark mode toggle"},
		errors: []string{"SELECTOR", "ETIMEDOUT", "404", "-32602", "500"}},
}

var projects = []string{"payments-service", "web-frontend", "data-pipeline", "mobile-app", "infra-terraform", "ml-training",
	"billing-core", "search-platform", "auth-service", "docs-site", "analytics-dashboard", "notification-hub",
	"inventory-api", "recommendation-engine", "customer-portal", "edge-proxy", "reporting-jobs", "chat-support",
	"feature-store", "media-transcoder", "ledger", "fraud-detection", "onboarding-flow", "partner-gateway"}

var taskTypes = map[string]string{"filesystem": "edit", "git": "release", "http": "research", "postgres": "data",
	"github": "review", "shell": "build", "kubernetes": "deploy", "browser": "ui-test"}

var staleRemedies = []string{"retry the same call immediately", "ask the user to fix it by hand", "ignore the error and continue",
	"restart the MCP server and try again", "wait a minute and repeat the call"}

type gen struct {
	r    *rand.Rand
	n    int
	exps []hindsight.Experience
}

func (g *gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

// Cases is the number of cases (five experiences each); Queries of them
// get a labelled query.
const (
	Cases   = 420
	Queries = 260
)

// Generate returns the experiences and queries.
func Generate() ([]hindsight.Experience, []Query) {
	g := &gen{r: rand.New(rand.NewPCG(20261101, 4))}
	var qs []Query
	for c := range Cases {
		srv := servers[g.r.IntN(len(servers))]
		tool := g.pick(srv.tools)
		code := g.pick(srv.errors)
		otherCode := g.pick(srv.errors)
		for otherCode == code {
			otherCode = g.pick(srv.errors)
		}
		otherTool := g.pick(srv.tools)
		for otherTool == tool {
			otherTool = g.pick(srv.tools)
		}
		obj, proj := g.pick(srv.objects), g.pick(projects)
		obj2, proj2 := g.pick(srv.objects), g.pick(projects)
		for obj2 == obj {
			obj2 = g.pick(srv.objects)
		}
		for proj2 == proj {
			proj2 = g.pick(projects)
		}
		zh := c%8 == 7
		target := g.add(srv, tool, code, obj, proj, zh, "")
		g.add(srv, tool, otherCode, obj, proj, zh, "")
		g.add(srv, otherTool, code, obj, proj, zh, "")
		stale := g.add(srv, tool, code, obj, proj, zh, g.pick(staleRemedies))
		g.exps[stale].SupersededBy = g.exps[target].ID
		g.exps[stale].CreatedAt = g.exps[target].CreatedAt.Add(-time.Duration(1+g.r.IntN(20)) * 24 * time.Hour)
		g.add(srv, tool, code, obj2, proj2, zh, "")
		if c < Queries {
			qs = append(qs, g.query(c, srv, tool, code, obj, proj, zh, g.exps[target].ID))
		}
	}
	return g.exps, qs
}

// add appends an experience; a non-empty stale remedy makes an outdated
// lesson.
func (g *gen) add(srv server, tool, code, obj, proj string, zh bool, stale string) int {
	ek := errorKinds[code]
	g.n++
	e := hindsight.Experience{
		ID: fmt.Sprintf("exp-%04d", g.n), Version: 1, Namespace: hindsight.DefaultNamespace,
		Server: srv.name, Tool: tool, TaskType: taskTypes[srv.name], ErrorCode: ek.code,
		Confidence:    0.5 + 0.05*float64(g.r.IntN(10)),
		SourceTask:    fmt.Sprintf("task-%05d", g.r.IntN(100000)),
		SourceSteps:   []int{g.r.IntN(5), 5 + g.r.IntN(5)},
		EvidenceCount: 1 + g.r.IntN(4),
		HitCount:      g.r.IntN(6),
		SourceAgent:   g.pick([]string{"claude-code", "cursor", "codex", "goose"}),
		CreatedAt:     RefTime.Add(-time.Duration(1+g.r.IntN(60*24)) * time.Hour),
	}
	e.UpdatedAt = e.CreatedAt
	msg := ek.msgs[g.r.IntN(2)] // queries use the third wording or the other one
	remedy := fmt.Sprintf(ek.remedy, obj)
	if stale != "" {
		remedy = stale
		e.Confidence = 0.3
	}
	if zh {
		msgZh := ek.msgsZh[0]
		verb := srv.verbsZh[tool][0]
		e.Situation = fmt.Sprintf("在 %s 项目中%s %s 时失败：%s（%s）", proj, verb, obj, msgZh, ek.code)
		e.Action = fmt.Sprintf("调用 %s 处理 %s", tool, obj)
		e.Result = "按下面的做法修正后成功"
		if stale == "" {
			remedy = fmt.Sprintf(ek.zh, obj)
		}
		e.Lesson = fmt.Sprintf("%s 返回 %s 时：%s。", tool, ek.code, remedy)
	} else {
		verb := srv.verbs[tool][0]
		e.Situation = fmt.Sprintf("%s %s in the %s project failed: %s (%s)", verb, obj, proj, msg, ek.code)
		e.Action = fmt.Sprintf("called %s on %s", tool, obj)
		e.Result = "succeeded after the fix below"
		e.Lesson = fmt.Sprintf("When %s fails with %s on %s: %s.", tool, ek.code, obj, remedy)
	}
	g.exps = append(g.exps, e)
	return len(g.exps) - 1
}

func (g *gen) query(c int, srv server, tool, code, obj, proj string, zh bool, want string) Query {
	ek := errorKinds[code]
	q := Query{ID: fmt.Sprintf("q-%03d", c), Server: srv.name, Tool: tool, ErrorCode: ek.code, Want: want, Lang: "en"}
	if zh {
		q.Lang = "zh"
		q.Text = fmt.Sprintf("%s项目里%s%s报错：%s", proj, srv.verbsZh[tool][1], obj, ek.msgsZh[1])
		return q
	}
	tmpl := []string{
		"%s %s for %s gives %q",
		"while %s %s (%s) I got: %s",
		"%s %s in %s keeps failing with %s",
	}[g.r.IntN(3)]
	q.Text = fmt.Sprintf(tmpl, srv.verbs[tool][1], obj, proj, ek.msgs[2])
	return q
}

// Write writes experiences.jsonl and queries.jsonl into dir.
func Write(dir string, exps []hindsight.Experience, qs []Query) error {
	return WriteSet(dir, "", exps, qs)
}

// WriteSet writes PREFIXexperiences.jsonl and PREFIXqueries.jsonl into
// dir (prefix "" for the main set, HardPrefix for the hard-negative set).
func WriteSet(dir, prefix string, exps []hindsight.Experience, qs []Query) error {
	if err := writeJSONL(filepath.Join(dir, prefix+"experiences.jsonl"), exps); err != nil {
		return fmt.Errorf("write benchmark: %w", err)
	}
	if err := writeJSONL(filepath.Join(dir, prefix+"queries.jsonl"), qs); err != nil {
		return fmt.Errorf("write benchmark: %w", err)
	}
	return nil
}

func writeJSONL[T any](path string, xs []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range xs {
		if err := enc.Encode(&xs[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Load reads the committed benchmark from dir.
func Load(dir string) ([]hindsight.Experience, []Query, error) {
	return LoadSet(dir, "")
}

// LoadSet reads the committed set of prefix (see WriteSet) from dir.
func LoadSet(dir, prefix string) ([]hindsight.Experience, []Query, error) {
	exps, err := readJSONL[hindsight.Experience](filepath.Join(dir, prefix+"experiences.jsonl"))
	if err != nil {
		return nil, nil, fmt.Errorf("load benchmark: %w", err)
	}
	qs, err := readJSONL[Query](filepath.Join(dir, prefix+"queries.jsonl"))
	if err != nil {
		return nil, nil, fmt.Errorf("load benchmark: %w", err)
	}
	return exps, qs, nil
}

func readJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var x T
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, x)
	}
	return out, sc.Err()
}

// Synthetic returns n experiences drawn from the benchmark's vocabulary
// (random servers, tools, errors, objects and projects; one in eight in
// Chinese) and q queries paraphrasing some of them, for load and latency
// benchmarks. It is deterministic for a given n and q.
func Synthetic(n, q int) ([]hindsight.Experience, []Query) {
	g := &gen{r: rand.New(rand.NewPCG(uint64(n), 7))}
	var qs []Query
	for i := range n {
		srv := servers[g.r.IntN(len(servers))]
		tool, code := g.pick(srv.tools), g.pick(srv.errors)
		obj, proj := g.pick(srv.objects), g.pick(projects)
		zh := i%8 == 7
		idx := g.add(srv, tool, code, obj, proj, zh, "")
		if len(qs) < q && i%max(n/q, 1) == 0 {
			qs = append(qs, g.query(i, srv, tool, code, obj, proj, zh, g.exps[idx].ID))
		}
	}
	return g.exps, qs
}
