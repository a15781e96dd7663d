package errtemplate

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// goldenCase is one line of testdata/golden/input.txt.
type goldenCase struct {
	tool, text string // tool is "server/tool"
}

func (g goldenCase) key() string { return strings.Replace(g.tool, "/", "\x00", 1) }

func readGoldenInput(t testing.TB) []goldenCase {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", "input.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tool, text, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("input line without a tab: %q", line)
		}
		out = append(out, goldenCase{tool, text})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGolden feeds the golden input through one Miner, compares what it learns
// with templates.golden (-update rewrites it) and checks the properties the
// golden must have.
func TestGolden(t *testing.T) {
	cases := readGoldenInput(t)
	m := NewMiner(Options{})
	ids := map[string]string{}       // tool + "\t" + text → cluster id
	templates := map[string]string{} // id → final template
	var b strings.Builder
	b.WriteString("# text → cluster id, template after the text (+ when created or changed)\n")
	for _, g := range cases {
		c, changed := m.Add(g.key(), g.text)
		mark := " "
		if changed {
			mark = "+"
		}
		fmt.Fprintf(&b, "%s\t%s\n\t%s %s %s\n", g.tool, g.text, mark, c.ID, c.Template)
		ids[g.tool+"\t"+g.text] = c.ID
	}
	b.WriteString("\n# final clusters: tool, id, size, template\n")
	var tools []string
	for _, g := range cases {
		if !slices.Contains(tools, g.tool) {
			tools = append(tools, g.tool)
		}
	}
	for _, tool := range tools {
		for _, c := range m.Clusters(goldenCase{tool: tool}.key()) {
			fmt.Fprintf(&b, "%s\t%s\t%d\t%s\n", tool, c.ID, c.Size, c.Template)
			templates[c.ID] = c.Template
		}
	}
	path := filepath.Join("testdata", "golden", "templates.golden")
	testkit.Golden(t, path, b.String())

	id := func(tool, text string) string {
		t.Helper()
		v, ok := ids[tool+"\t"+text]
		if !ok {
			t.Fatalf("no golden text %s %q", tool, text)
		}
		return v
	}
	same := func(tool string, texts ...string) string {
		t.Helper()
		first := id(tool, texts[0])
		for _, x := range texts[1:] {
			if got := id(tool, x); got != first {
				t.Errorf("%q and %q: clusters %s and %s, want one", texts[0], x, first, got)
			}
		}
		return templates[first]
	}
	differ := func(tool, a, b string) {
		t.Helper()
		if id(tool, a) == id(tool, b) {
			t.Errorf("%q and %q share cluster %s (%q)", a, b, id(tool, a), templates[id(tool, a)])
		}
	}
	wantTemplate := func(got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("template %q, want %q", got, want)
		}
	}

	wantTemplate(same("payments/charge",
		"payment amount does not add up, total price is 1203, but paid 833",
		"payment amount does not add up, total price is 455, but paid 400",
		"payment amount does not add up, total price is 99.50, but paid 12"),
		"payment amount does not add up, total price is <*>, but paid <*>")
	wantTemplate(same("payments/charge", "missing required argument: currency", "missing required argument: amount"),
		"missing required argument: <*>")
	wantTemplate(same("payments/charge",
		"gift card gift_card_6276644 has insufficient balance: $12.50 available, $40.00 required",
		"gift card gift_card_1180023 has insufficient balance: $3.00 available, $7.25 required"),
		"gift card <*> has insufficient balance: <*> available, <*> required")
	wantTemplate(same("payments/charge", "order ord_12ab already refunded", "order ord_99xz already refunded"),
		"order <*> already refunded")
	wantTemplate(same("payments/charge", "HTTP 429 Too Many Requests: Retry after 300 ms", "HTTP 429 Too Many Requests: Retry after 1200 ms"),
		"HTTP 429 Too Many Requests: Retry after <*> ms")
	differ("payments/charge", "missing required argument: currency", "payment amount does not add up, total price is 1203, but paid 833")

	const air = "airline/get_reservation"
	wantTemplate(same(air, "reservation KA7I60 not found", "reservation ZX81QQ not found", "reservation 4WBQ2L not found"),
		"reservation <*> not found")
	wantTemplate(same(air, "user alice_1984 not found", "user bob_77 not found"), "user <*> not found")
	differ(air, "reservation KA7I60 not found", "user alice_1984 not found")
	differ(air, "user alice_1984 not found", "user Alice Smith not found")
	wantTemplate(same(air,
		"reservation KA7I60 cannot be cancelled: flight already departed on 2024-05-01T09:30:00Z",
		"reservation P0Q9RT cannot be cancelled: flight already departed on 2024-06-12T17:05:00Z"),
		"reservation <*> cannot be cancelled: flight already departed on <*>")
	if c, ok := m.Match("airline\x00get_reservation", "user Alice Smith not found"); !ok || c.Size != 2 {
		t.Errorf("the repeated name: %+v, %v; want its cluster with size 2", c, ok)
	}

	const cal = "calendar/create_event"
	wantTemplate(same(cal,
		"invalid date format '03/15/2025', expected YYYY-MM-DD",
		"invalid date format '15-03-2025', expected YYYY-MM-DD",
		`invalid date format "March 15", expected YYYY-MM-DD`),
		"invalid date format <*>, expected YYYY-MM-DD")
	wantTemplate(same(cal, "event evt_5f3a2c overlaps with event evt_77aa01 from 14:30 to 15:00",
		"event evt_0b1c2d overlaps with event evt_9e8f70 from 09:00 to 09:30"),
		"event <*> overlaps with event <*> from <*> to <*>")
	wantTemplate(same(cal, "attendee bob@example.com has declined", "attendee carol@example.org has declined"),
		"attendee <*> has declined")
	wantTemplate(same(cal, "calendar work@example.com not found", "calendar team@example.org not found"),
		"calendar <*> not found")
	differ(cal, "HTTP 401 Unauthorized: access token expired", "HTTP 404 Not Found: calendar c_8812 does not exist")

	const fs = "fs/read_file"
	wantTemplate(same(fs,
		"ENOENT: no such file or directory, open '/home/alice/notes.txt'",
		"ENOENT: no such file or directory, open '/var/log/app/error.log'",
		`ENOENT: no such file or directory, open "/home/bob/My Documents/plan.md"`),
		"ENOENT: no such file or directory, open <*>")
	differ(fs, "ENOENT: no such file or directory, open '/home/alice/notes.txt'", "EACCES: permission denied, open '/etc/shadow'")
	wantTemplate(same(fs,
		`Access denied - path outside allowed directories: /tmp/x.txt not in /home/alice`,
		`Access denied - path outside allowed directories: C:\Users\bob\secret.txt not in /home/bob`),
		"Access denied - path outside allowed directories: <*> not in <*>")
	wantTemplate(same(fs, "file too large: 10485760 bytes exceeds limit of 1048576 bytes", "file too large: 5242881 bytes exceeds limit of 1048576 bytes"),
		"file too large: <*> bytes exceeds limit of <*> bytes")

	const web = "http/fetch"
	wantTemplate(same(web, "request to https://api.example.com/v1/users/42 failed with status 404",
		"request to https://api.example.com/v1/orders/7 failed with status 404"),
		"request to <*> failed with status 404")
	differ(web, "request to https://api.example.com/v1/users/42 failed with status 404",
		"request to https://api.example.com/v1/users/42 failed with status 401")
	differ(web, "request to https://api.example.com/v1/users/42 failed with status 401",
		"request to https://api.example.com/v1/items failed with status 429")
	differ(web, "HTTP 401 Unauthorized", "HTTP 404 Not Found")
	wantTemplate(same(web, "GET http://10.0.0.12:8080/health: connection refused", "GET http://192.168.1.5/health: connection refused"),
		"GET <*>: connection refused")
	wantTemplate(same(web, "dial tcp 10.0.0.12:5432: i/o timeout", "dial tcp 192.168.3.40:5432: i/o timeout"),
		"dial tcp <*>: i/o timeout")
	wantTemplate(same(web, "Retry after 300 ms", "Retry after 1500 ms"), "Retry after <*> ms")
	wantTemplate(same(web, "HTTP 401 Unauthorized", "HTTP 401 Unauthorized"), "HTTP 401 Unauthorized")

	const crm = "crm/update_contact"
	wantTemplate(same(crm, "contact 8f14e45f-ceea-467f-a0e6-0123456789ab not found", "contact 1c2d3e4f-0000-4000-8000-abcdefabcdef not found"),
		"contact <*> not found")
	wantTemplate(same(crm, "rate limit exceeded, try again in 30s", "rate limit exceeded, try again in 45s"),
		"rate limit exceeded, try again in <*>")
	differ(crm, "validation failed: field 'email' must be a valid e-mail address", `validation failed: field "name" is required`)

	// Every text is an instance of its cluster's final template, and joins it.
	for _, g := range cases {
		c, ok := m.Match(g.key(), g.text)
		if !ok || c.ID != ids[g.tool+"\t"+g.text] {
			t.Errorf("Match(%s, %q) = %s, %v; want %s", g.tool, g.text, c.ID, ok, ids[g.tool+"\t"+g.text])
		}
		if s := Similarity(c.Template, g.text); s != 1 {
			t.Errorf("Similarity(%q, %q) = %v, want 1", c.Template, g.text, s)
		}
	}
}
