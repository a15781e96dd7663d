package corpus

import (
	"fmt"
	"strings"
)

// The files server: a file system export share. Its workflow: find an
// export, read it, write a summary next to it.

const filesTools = `[
{"name":"list_directory","description":"List the entries of a directory.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},
{"name":"read_file","description":"Read a file's contents.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"encoding":{"type":"string","enum":["utf-8","base64"],"default":"utf-8"}},"required":["path"]}},
{"name":"write_file","description":"Create or overwrite a file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}},
{"name":"think","description":"Think before acting. Returns nothing.","inputSchema":{"type":"object","properties":{"thought":{"type":"string"}},"required":["thought"]}}
]`

var teams = []string{"finance", "ops", "growth", "support", "logistics", "procurement", "hr"}
var exportKinds = []string{"orders", "refunds", "tickets", "shipments", "payouts", "signups", "stock-levels"}

func (t *task) filesFlow(specs map[string]bool) {
	g := t.g
	team := g.pick(teams)
	dir := g.fresh(func() string { return fmt.Sprintf("/srv/exports/%s/batch-%04d", team, g.between(1, 9999)) })
	kind := g.pick(exportKinds)
	month := t.start.AddDate(0, -1, 0).Format("2006-01")
	file := fmt.Sprintf("%s-%s.csv", kind, month)
	var entries []map[string]any
	for _, name := range []string{file, "README.txt", fmt.Sprintf("%s-%s.csv", g.pick(exportKinds), month)} {
		if len(entries) > 0 && name == file {
			continue
		}
		entries = append(entries, map[string]any{"name": name, "type": "file", "size": g.between(800, 90000)})
	}
	listing := map[string]any{"path": dir, "entries": entries}
	rows := g.between(40, 4000)
	total := g.amount(1000, 90000)
	content := fmt.Sprintf("id,date,amount\n%s-1,%s-03,%s\n%s-2,%s-04,%s\n# %d rows, total %s\n",
		strings.ToUpper(kind[:3]), month, money(g.amount(5, 400)), strings.ToUpper(kind[:3]), month, money(g.amount(5, 400)), rows, money(total))
	read := map[string]any{"path": dir + "/" + file}

	if specs[ClassFileNotFound] {
		guess := g.pick([]string{
			fmt.Sprintf("%s_%s.csv", kind, month),
			fmt.Sprintf("%s-%s.csv", kind, t.start.Format("2006-01")),
			kind + ".csv",
			fmt.Sprintf("%s/%s.csv", month, kind),
		})
		bad := dir + "/" + guess
		f := t.fail("files", "read_file", map[string]any{"path": bad}, fmt.Sprintf("ENOENT: no such file or directory, open '%s'", bad))
		t.ok("files", "list_directory", map[string]any{"path": dir}, listing)
		s := t.ok("files", "read_file", read, content)
		if g.chance(0.4) {
			s.thought = fmt.Sprintf("The export is called %s.", file)
		}
		t.episode(ClassFileNotFound, s, f)
	} else {
		if g.chance(0.6) {
			t.do("files", "list_directory", map[string]any{"path": dir}, listing)
		}
		t.do("files", "read_file", read, content)
	}
	out := g.fresh(func() string { return fmt.Sprintf("/srv/reports/%s/%s-summary-%s.md", team, kind, g.hex(6)) })
	summary := fmt.Sprintf("# %s %s\n\n%d rows, total %s.\n", strings.ToUpper(kind[:1])+kind[1:], month, rows, money(total))
	t.do("files", "write_file", map[string]any{"path": out, "content": summary}, map[string]any{"path": out, "bytes_written": len(summary)})
}
