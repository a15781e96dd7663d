// Package llm is the reflector that asks a language model, through any
// OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM…).
//
// It lives apart from package reflect so that binaries without an LLM (the
// sidecar) do not link the OpenAI client.
package llm

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// DefaultPrompt is the built-in reflection prompt, the same text as
// configs/reflect-prompt.tmpl.
//
//go:embed prompt.tmpl
var DefaultPrompt string

// Errors of an LLM answer that holds no experiences to read. A task whose
// reflection fails with one of them is retried, then marked failed.
var (
	ErrRefused     = errors.New("model refused")
	ErrEmptyAnswer = errors.New("empty answer")
)

// MaxTemperature is the highest sampling temperature reflection uses:
// lessons should be reproducible, not creative.
const MaxTemperature = 0.2

// Config configures the LLM reflector. BaseURL, APIKey and Model come
// from the configuration file or HINDSIGHT_LLM_*; the rest has defaults.
// It has one field per setting (llm.* in the configuration), each with
// its default, so it is wide and flat.
type Config struct {
	BaseURL string // an OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1
	APIKey  string
	Model   string
	// PromptTemplate is a text/template file replacing the built-in prompt
	// (config llm.prompt_template). It must define "system" and "user".
	PromptTemplate string
	// Temperature is clamped to [0, MaxTemperature]; the default is 0.
	Temperature float64
	// TokenBudget bounds the rendered trajectory; 0 means reflect.DefaultTokenBudget.
	TokenBudget int
	// MaxOutputTokens bounds the answer; 0 means 2000.
	MaxOutputTokens int
	// MaxExperiences is how many experiences the prompt asks for at most; 0
	// means 5.
	MaxExperiences int
	// MinConfidence is quoted in the prompt; 0 means reflect.DefaultMinConfidence.
	MinConfidence float64
	// RequestTimeout bounds one HTTP attempt; 0 means 2 minutes. A timed-out
	// attempt is retried TimeoutRetries times (0 means 1; negative, none).
	RequestTimeout time.Duration
	TimeoutRetries int
	// MaxRetries is how often the client retries 408, 409, 429, 5xx and
	// connection errors, honouring Retry-After; 0 means 3, negative none.
	MaxRetries int
	// MaxRetryDelay caps the wait between retries; 0 means 30s.
	MaxRetryDelay time.Duration
	// CallsPerHour and TokensPerHour cap spending over a sliding hour; 0
	// means 120 calls and 1,000,000 tokens, negative means no cap.
	CallsPerHour, TokensPerHour int
	// ReflectSuccesses sends tasks without any failure to the model too. By
	// default they yield nothing without a call: routine successes rarely
	// teach anything.
	ReflectSuccesses bool
	// NoSchema skips response_format for endpoints that reject JSON
	// schemas; the answer is then read by the tolerant parser alone. An
	// endpoint answering 400 to a schema is detected and switched over once.
	NoSchema bool

	// Redactor scrubs the excerpts of model answers that go into log
	// lines; without one, excerpts are left out.
	Redactor reflect.Redactor

	HTTPClient *http.Client
	Logger     *slog.Logger
	Metrics    *reflect.Metrics
}

// Reflector is the reflector that asks a language model, through any
// OpenAI-compatible chat completions endpoint.
type Reflector struct {
	cfg      Config
	client   openai.Client
	tmpl     *template.Template
	renderer reflect.Renderer
	budget   *reflect.Budget
	noSchema atomic.Bool
}

// New returns an LLM reflector. It reads and checks the prompt template
// and loads the tokenizer; it does not contact the endpoint.
func New(cfg Config) (*Reflector, error) {
	if cfg.Model == "" {
		return nil, errors.New("new llm reflector: no model configured")
	}
	cfg.Temperature = math.Max(0, math.Min(cfg.Temperature, MaxTemperature))
	if cfg.MaxOutputTokens <= 0 {
		cfg.MaxOutputTokens = 2000
	}
	if cfg.MaxExperiences <= 0 {
		cfg.MaxExperiences = 5
	}
	if cfg.MinConfidence <= 0 {
		cfg.MinConfidence = reflect.DefaultMinConfidence
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Minute
	}
	if cfg.TimeoutRetries == 0 {
		cfg.TimeoutRetries = 1
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.MaxRetryDelay <= 0 {
		cfg.MaxRetryDelay = 30 * time.Second
	}
	if cfg.CallsPerHour == 0 {
		cfg.CallsPerHour = 120
	}
	if cfg.TokensPerHour == 0 {
		cfg.TokensPerHour = 1_000_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	tmpl, err := LoadPrompt(cfg.PromptTemplate)
	if err != nil {
		return nil, err
	}
	tok, err := reflect.NewTokenizer(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("new llm reflector: %w", err)
	}
	l := &Reflector{
		cfg:      cfg,
		tmpl:     tmpl,
		renderer: reflect.Renderer{Tokenizer: tok, Budget: cfg.TokenBudget},
		budget:   &reflect.Budget{CallsPerHour: max(cfg.CallsPerHour, 0), TokensPerHour: max(cfg.TokensPerHour, 0)},
	}
	l.noSchema.Store(cfg.NoSchema)
	opts := []option.RequestOption{
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(max(cfg.MaxRetries, 0)),
		option.WithMaxRetryDelay(cfg.MaxRetryDelay),
		option.WithRequestTimeout(cfg.RequestTimeout),
		option.WithMiddleware(l.countRequest),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	l.client = openai.NewClient(opts...)
	return l, nil
}

// LoadPrompt parses the prompt template in file, or the built-in one when
// file is "". The template must define "user"; "system" is optional.
func LoadPrompt(file string) (*template.Template, error) {
	text, name := DefaultPrompt, "reflect-prompt.tmpl"
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read prompt template: %w", err)
		}
		text, name = string(b), file
	}
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parse prompt template: %w", err)
	}
	if t.Lookup("user") == nil {
		return nil, fmt.Errorf("parse prompt template %s: no {{define \"user\"}} block", name)
	}
	return t, nil
}

// PromptData is what the prompt template is executed with.
type PromptData struct {
	TaskID         string
	Servers        []string
	StepCount      int
	FailureCount   int
	Trajectory     string
	MaxExperiences int
	MinConfidence  float64
}

// Budget returns the hourly spending cap, to read what was used.
func (l *Reflector) Budget() *reflect.Budget { return l.budget }

func (l *Reflector) countRequest(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	l.budget.Spend(1, 0)
	l.cfg.Metrics.LLMRequest()
	return next(req)
}

// Reflect implements Reflector.
func (l *Reflector) Reflect(ctx context.Context, task *hindsight.Task) ([]hindsight.Experience, error) {
	calls := reflect.ToolCalls(task)
	if len(calls) == 0 {
		return nil, nil
	}
	failures := 0
	for _, c := range calls {
		if c.Failed() || c.CausalTag == hindsight.TagRetry {
			failures++
		}
	}
	if failures == 0 && !l.cfg.ReflectSuccesses {
		return nil, nil
	}
	system, user, err := l.prompt(task, failures)
	if err != nil {
		return nil, err
	}
	answer, err := l.complete(ctx, task.ID, system, user)
	if err != nil {
		return nil, err
	}
	exps, err := reflect.ParseExperiences(answer)
	if err != nil {
		l.cfg.Metrics.LLMError("malformed")
		l.cfg.Logger.Warn("reflect: unreadable model answer", "task", task.ID, "err", err, "answer", l.scrub(reflect.Truncate(answer, 200)))
		return nil, fmt.Errorf("parse model answer: %w", err)
	}
	for i := range exps {
		exps[i].Origin = "llm:" + l.cfg.Model
	}
	return exps, nil
}

func (l *Reflector) prompt(task *hindsight.Task, failures int) (system, user string, err error) {
	traj, _ := l.renderer.Render(task)
	data := PromptData{
		TaskID:         task.ID,
		Servers:        task.Servers,
		StepCount:      len(task.Steps),
		FailureCount:   failures,
		Trajectory:     traj,
		MaxExperiences: l.cfg.MaxExperiences,
		MinConfidence:  l.cfg.MinConfidence,
	}
	var b bytes.Buffer
	if l.tmpl.Lookup("system") != nil {
		if err := l.tmpl.ExecuteTemplate(&b, "system", data); err != nil {
			return "", "", fmt.Errorf("execute prompt template: %w", err)
		}
		system = strings.TrimSpace(b.String())
		b.Reset()
	}
	if err := l.tmpl.ExecuteTemplate(&b, "user", data); err != nil {
		return "", "", fmt.Errorf("execute prompt template: %w", err)
	}
	return system, strings.TrimSpace(b.String()), nil
}

// complete asks the model and returns its answer's text.
func (l *Reflector) complete(ctx context.Context, taskID, system, user string) (string, error) {
	estimate := l.renderer.Count(system) + l.renderer.Count(user) + l.cfg.MaxOutputTokens
	if err := l.budget.Allow(estimate); err != nil {
		return "", err
	}
	var resp *openai.ChatCompletion
	var err error
	for attempt := 0; ; attempt++ {
		resp, err = l.client.Chat.Completions.New(ctx, l.params(system, user))
		if err != nil && !l.noSchema.Load() && schemaRejected(err) {
			l.cfg.Logger.Warn("reflect: endpoint rejects JSON schema output; using plain JSON answers", "err", err)
			l.noSchema.Store(true)
			resp, err = l.client.Chat.Completions.New(ctx, l.params(system, user))
		}
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || attempt >= l.cfg.TimeoutRetries {
			break
		}
		wait := time.Duration(1<<attempt) * time.Second / 2
		l.cfg.Logger.Warn("reflect: model request timed out; retrying", "task", taskID, "attempt", attempt+1, "wait", wait)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("ask model: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
	if err != nil {
		kind := "request"
		var apiErr *openai.Error
		switch {
		case errors.As(err, &apiErr):
			kind = fmt.Sprintf("http_%d", apiErr.StatusCode)
		case errors.Is(err, context.DeadlineExceeded):
			kind = "timeout"
		}
		l.cfg.Metrics.LLMError(kind)
		l.cfg.Logger.Warn("reflect: model request failed", "task", taskID, "kind", kind, "err", err)
		return "", fmt.Errorf("ask model: %w", err)
	}
	tokens := int(resp.Usage.TotalTokens)
	if tokens == 0 {
		tokens = estimate
	}
	l.budget.Spend(0, tokens)
	l.cfg.Metrics.LLMUsage(tokens)
	if len(resp.Choices) == 0 {
		l.cfg.Metrics.LLMError("empty")
		l.cfg.Logger.Warn("reflect: model answered with no choices", "task", taskID)
		return "", fmt.Errorf("ask model: %w: no choices", ErrEmptyAnswer)
	}
	msg := resp.Choices[0].Message
	if msg.Refusal != "" {
		l.cfg.Metrics.LLMError("refusal")
		l.cfg.Logger.Warn("reflect: model refused", "task", taskID, "refusal", l.scrub(reflect.Truncate(msg.Refusal, 200)))
		return "", fmt.Errorf("ask model: %w: %s", ErrRefused, l.scrub(reflect.Truncate(msg.Refusal, 200)))
	}
	if strings.TrimSpace(msg.Content) == "" {
		l.cfg.Metrics.LLMError("empty")
		l.cfg.Logger.Warn("reflect: model answered with empty content", "task", taskID, "finish_reason", resp.Choices[0].FinishReason)
		return "", fmt.Errorf("ask model: %w", ErrEmptyAnswer)
	}
	return msg.Content, nil
}

// scrub redacts model text bound for logs and errors.
func (l *Reflector) scrub(s string) string {
	if l.cfg.Redactor == nil {
		return fmt.Sprintf("(%d bytes)", len(s))
	}
	s, _ = l.cfg.Redactor.Redact(s)
	return s
}

func (l *Reflector) params(system, user string) openai.ChatCompletionNewParams {
	var msgs []openai.ChatCompletionMessageParamUnion
	if system != "" {
		msgs = append(msgs, openai.SystemMessage(system))
	}
	msgs = append(msgs, openai.UserMessage(user))
	p := openai.ChatCompletionNewParams{
		Model:               shared.ChatModel(l.cfg.Model),
		Messages:            msgs,
		Temperature:         openai.Float(l.cfg.Temperature),
		MaxCompletionTokens: openai.Int(int64(l.cfg.MaxOutputTokens)),
	}
	if !l.noSchema.Load() {
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
					Name:        "experiences",
					Description: openai.String("Lessons distilled from one agent task"),
					Strict:      openai.Bool(true),
					Schema:      experienceSchema,
				},
			},
		}
	}
	return p
}

// schemaRejected reports whether err is an endpoint's 400 about the
// response_format it does not support.
func schemaRejected(err error) bool {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		return false
	}
	s := strings.ToLower(apiErr.Message + " " + apiErr.Param + " " + apiErr.RawJSON())
	return strings.Contains(s, "response_format") || strings.Contains(s, "json_schema")
}

// experienceSchema is the JSON schema of the answer (strict mode: every
// property required, no others).
var experienceSchema = map[string]any{
	"type":                 "object",
	"additionalProperties": false,
	"required":             []string{"experiences"},
	"properties": map[string]any{
		"experiences": map[string]any{
			"type": "array",
			"items": map[string]any{
				"type":                 "object",
				"additionalProperties": false,
				"required":             []string{"situation", "action", "result", "lesson", "confidence", "source_steps", "tool", "error_code", "task_type"},
				"properties": map[string]any{
					"situation":    map[string]any{"type": "string"},
					"action":       map[string]any{"type": "string"},
					"result":       map[string]any{"type": "string"},
					"lesson":       map[string]any{"type": "string"},
					"confidence":   map[string]any{"type": "number"},
					"source_steps": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}},
					"tool":         map[string]any{"type": "string"},
					"error_code":   map[string]any{"type": "string"},
					"task_type":    map[string]any{"type": "string"},
				},
			},
		},
	},
}
