package ui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// findChromium returns the path of a Chromium (or Chrome), or "".
func findChromium() string {
	if p := os.Getenv("HINDSIGHT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// queryHindsight asks the sidecar's query_hindsight tool, as an agent of
// server shop would, and returns its answer's text.
func queryHindsight(t *testing.T, in *inject.Injector, situation string) string {
	t.Helper()
	params, _ := json.Marshal(map[string]any{"name": inject.QueryToolName, "arguments": map[string]string{"situation": situation}})
	h := in.ToolCall(&proxy.Session{ID: "agent", Server: "shop"}, inject.QueryToolName, params)
	if h == nil {
		t.Fatal("query_hindsight is not answered")
	}
	res, err := h(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return string(res)
}

// TestBrowser drives the UI in headless Chromium: the timeline, a search,
// an edit (a new version, origin manual), a forget, and then the lesson
// is gone from query_hindsight.
func TestBrowser(t *testing.T) {
	exe := findChromium()
	if exe == "" {
		t.Skip("no chromium found (apt-get install chromium, or set HINDSIGHT_CHROMIUM)")
	}
	client := startDaemon(t)
	raw, err := client.UI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("headless", "new"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	in := &inject.Injector{Source: client, Server: "shop", Logger: quiet}
	const edited = "Raise the payment timeout to 30s before retrying a gateway timeout."
	if got := queryHindsight(t, in, "the payment gateway timed out"); !strings.Contains(got, lessonText) {
		t.Fatalf("before: query_hindsight answered %s, want the lesson", got)
	}

	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	// settled waits until the text of sel satisfies ok and returns it: a
	// click that submits a form navigates, and the old page (or none,
	// while the new one loads) answers in between.
	settled := func(sel string, ok func(string) bool) string {
		t.Helper()
		var last string
		var lastErr error
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
			if err == nil && ok(strings.TrimSpace(s)) {
				return strings.TrimSpace(s)
			}
			last, lastErr = strings.TrimSpace(s), err
		}
		t.Errorf("text of %s never settled: %q (%v)", sel, last, lastErr)
		return last
	}
	row := chromedp.CSS(`tr.experience[data-id="` + lessonID + `"]`)

	step("load", chromedp.Navigate(raw), chromedp.WaitVisible(chromedp.CSS(`li.task`)))
	if timeline := text(`ol.timeline`); !strings.Contains(timeline, "task-1") || !strings.Contains(timeline, "3 steps") {
		t.Errorf("timeline: %q", timeline)
	}
	step("search",
		chromedp.Click(chromedp.CSS(`nav a[href="/experiences"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#search input[name=q]`)),
		chromedp.SendKeys(chromedp.CSS(`#search input[name=q]`), "gateway timeout"),
		chromedp.SendKeys(chromedp.CSS(`#search input[name=server]`), "shop"),
		chromedp.Click(chromedp.CSS(`#search button`)),
		chromedp.WaitVisible(row))
	settled(`table.experiences tbody`, func(found string) bool {
		return strings.Contains(found, lessonText) && !strings.Contains(found, "List the directory")
	})
	step("edit",
		chromedp.Click(chromedp.CSS(`tr.experience[data-id="`+lessonID+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#edit`)),
		chromedp.SetValue(chromedp.CSS(`#edit textarea[name=lesson]`), edited),
		chromedp.Click(chromedp.CSS(`#edit button`)),
		chromedp.WaitVisible(`//span[@id="origin" and text()="manual"]`))
	if origin, version, lesson := text(`#origin`), text(`#version`), text(`#lesson`); origin != "manual" || version != "2" || lesson != edited {
		t.Errorf("after edit: origin %q, version %q, lesson %q; want manual, 2, the edit", origin, version, lesson)
	}
	if got := queryHindsight(t, in, "the payment gateway timed out"); !strings.Contains(got, edited) {
		t.Fatalf("after edit: query_hindsight answered %s, want the edited lesson", got)
	}

	step("forget", chromedp.Click(chromedp.CSS(`#forget button`)), chromedp.WaitVisible(chromedp.CSS(`#restore`)))
	forgetShown, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#forget") !== null`))
	if status := text(`.status`); err != nil || status != "forgotten" || forgetShown {
		t.Errorf("after forget: status %q, forget button shown %v (%v)", status, forgetShown, err)
	}
	e, err := client.Experience(context.Background(), "", lessonID)
	if err != nil || !e.Deleted {
		t.Fatalf("after forget: %+v, %v; want it deleted", e, err)
	}
	if got := queryHindsight(t, in, "the payment gateway timed out"); strings.Contains(got, edited) || strings.Contains(got, lessonText) {
		t.Fatalf("after forget: query_hindsight still answers the lesson: %s", got)
	}
}

// TestBrowserOtherPortNeverSeesToken: a browser that opened the UI's token
// URL then visits a page served on another port of 127.0.0.1, which
// receives the browser's 127.0.0.1 cookies: none holds the token (the
// cookie is a session id), and the UI still answers the browser.
func TestBrowserOtherPortNeverSeesToken(t *testing.T) {
	exe := findChromium()
	if exe == "" {
		t.Skip("no chromium found (apt-get install chromium, or set HINDSIGHT_CHROMIUM)")
	}
	client := startDaemon(t)
	raw, err := client.UI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	token := raw[strings.Index(raw, "token=")+len("token="):]
	var mu sync.Mutex
	var seen []string // what the other port received: every header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for k, vs := range r.Header {
			seen = append(seen, k+": "+strings.Join(vs, "; "))
		}
		seen = append(seen, r.URL.String())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><title>other</title><p id="other">another local server</p>`)
	}))
	defer other.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("headless", "new"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("open the UI", chromedp.Navigate(raw), chromedp.WaitVisible(chromedp.CSS(`li.task`)))
	do("visit the other port", chromedp.Navigate(other.URL+"/page"), chromedp.WaitVisible(chromedp.CSS(`#other`)))
	do("back to the UI without the token", chromedp.Navigate(strings.Split(raw, "?")[0]+"experiences"), chromedp.WaitVisible(chromedp.CSS(`#search`)))

	mu.Lock()
	defer mu.Unlock()
	cookies := 0
	for _, h := range seen {
		if strings.Contains(h, token) {
			t.Errorf("the page on another port received the token: %s", h)
		}
		if strings.HasPrefix(h, "Cookie: ") {
			cookies++
		}
	}
	if cookies == 0 {
		t.Errorf("the other port received no cookie: the test shows nothing (headers %q)", seen)
	}
}
