package reflect

import (
	"context"
	"strings"
	"testing"
)

// TestPartialLessons: a real jsonschema validator (a Python MCP text
// editor) asks for one property at a time; each next call added the
// property the error quoted, and each step past it is a lesson, before
// the task ever succeeds.
func TestPartialLessons(t *testing.T) {
	task := newTrace("t-partial").
		fail("get_text_file_contents", `{"files":[{"path":"/root/a.md"}]}`, "Input validation error: 'file_path' is a required property", "").
		fail("get_text_file_contents", `{"files":[{"file_path":"/root/a.md"}]}`, "Input validation error: 'ranges' is a required property", "").
		fail("get_text_file_contents", `{"files":[{"file_path":"/root/a.md","ranges":[{"start":1}]}]}`, "Error processing request: File not found: /root/a.md", "").
		build()
	exps, err := Rules{}.Reflect(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	var lessons []string
	for _, e := range exps {
		lessons = append(lessons, e.Lesson)
		if strings.Contains(e.Lesson, "/root/a.md") {
			t.Errorf("lesson quotes the task's path: %s", e.Lesson)
		}
	}
	all := strings.Join(lessons, "\n")
	for _, want := range []string{
		"When get_text_file_contents fails with `Input validation error: 'file_path' is a required property`: pass files[].file_path",
		"When get_text_file_contents fails with `Input validation error: 'ranges' is a required property`: pass files[].ranges",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no lesson %q in\n%s", want, all)
		}
	}
	kept, drops := (&Validator{}).Validate(task, exps)
	for _, d := range drops {
		if strings.Contains(d.Experience.Lesson, "is a required property") {
			t.Errorf("dropped (%s: %s): %s", d.Reason, d.Detail, d.Experience.Lesson)
		}
	}
	for _, k := range kept {
		if strings.Contains(k.Lesson, "is a required property") && k.Confidence < DefaultInjectConfidence {
			t.Errorf("a lesson the error grounds starts below the gate: %v %s", k.Confidence, k.Lesson)
		}
	}
}
