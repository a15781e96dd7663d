package ui

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func do(t *testing.T, method, u string, hdr map[string]string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestGuards checks the token, the Host check and the CSRF checks, then
// that the pages render what the daemon holds.
func TestGuards(t *testing.T) {
	client := startDaemon(t)
	raw, err := client.UI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	again, err := client.UI(context.Background())
	if err != nil || again != raw {
		t.Fatalf("second start: %q, %v; want the running UI %q", again, err, raw)
	}
	u, _ := url.Parse(raw)
	token := u.Query().Get("token")
	base := "http://" + u.Host
	cookie := cookieName(u.Host) + "=" + token

	if resp, _ := do(t, "GET", base+"/tasks", nil, nil); resp.StatusCode != 403 {
		t.Errorf("no token: status %d, want 403", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", base+"/?token=wrong", nil, nil); resp.StatusCode != 403 {
		t.Errorf("wrong token: status %d, want 403", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", base+"/tasks", map[string]string{"Cookie": cookie, "Host": "evil.example:" + u.Port()}, nil); resp.StatusCode != 403 {
		t.Errorf("rebound host: status %d, want 403", resp.StatusCode)
	}
	resp, _ := do(t, "GET", raw, nil, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Set-Cookie"), cookie) ||
		strings.Contains(resp.Header.Get("Location"), "token") {
		t.Fatalf("token URL: status %d, cookie %q, location %q", resp.StatusCode, resp.Header.Get("Set-Cookie"), resp.Header.Get("Location"))
	}
	resp, body := do(t, "GET", base+"/tasks", map[string]string{"Cookie": cookie}, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "task-1") || !strings.Contains(body, "2 redactions") ||
		!strings.Contains(body, `class="dot tag-failure"`) {
		t.Fatalf("tasks: status %d, body %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", base+"/tasks/task-1", map[string]string{TokenHeader: token}, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "gateway timed out") || !strings.Contains(body, "2 redactions") ||
		!strings.Contains(body, lessonID) {
		t.Fatalf("task: status %d, body %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", base+"/experiences/"+lessonID, map[string]string{"Cookie": cookie}, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "task-1 #2") || !strings.Contains(body, "Earlier versions are not kept") {
		t.Fatalf("experience: status %d, body %s", resp.StatusCode, body)
	}

	forget := base + "/experiences/" + lessonID + "/forget"
	for name, c := range map[string]struct {
		hdr  map[string]string
		form url.Values
	}{
		"no origin":        {map[string]string{"Cookie": cookie}, url.Values{"token": {token}}},
		"other origin":     {map[string]string{"Cookie": cookie, "Origin": "http://evil.example"}, url.Values{"token": {token}}},
		"no form token":    {map[string]string{"Cookie": cookie, "Origin": base}, url.Values{}},
		"no cookie":        {map[string]string{"Origin": base}, url.Values{"token": {token}}},
		"wrong form token": {map[string]string{"Cookie": cookie, "Origin": base}, url.Values{"token": {"x"}}},
	} {
		if resp, _ := do(t, "POST", forget, c.hdr, c.form); resp.StatusCode != 403 {
			t.Errorf("forget, %s: status %d, want 403", name, resp.StatusCode)
		}
	}
	if e, _ := client.Experience(context.Background(), "", lessonID); e.Deleted {
		t.Fatal("a refused forget forgot the lesson")
	}
	resp, _ = do(t, "POST", forget, map[string]string{"Cookie": cookie, "Origin": base}, url.Values{"token": {token}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("forget: status %d", resp.StatusCode)
	}
	if e, _ := client.Experience(context.Background(), "", lessonID); !e.Deleted {
		t.Fatal("forget did not forget the lesson")
	}
}
