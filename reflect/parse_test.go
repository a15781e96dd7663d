package reflect

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseExperiences(t *testing.T) {
	one := `{"situation":"s","action":"a","result":"r","lesson":"Call login before list_orders","confidence":0.9,"source_steps":[2,4],"tool":"list_orders","error_code":"401","task_type":"shop"}`
	cases := []struct {
		name    string
		in      string
		n       int
		steps   []int
		conf    float64
		wantErr bool
	}{
		{name: "schema object", in: `{"experiences":[` + one + `]}`, n: 1, steps: []int{2, 4}, conf: 0.9},
		{name: "bare array", in: `[` + one + `,` + one + `]`, n: 2, steps: []int{2, 4}, conf: 0.9},
		{name: "single object", in: one, n: 1, steps: []int{2, 4}, conf: 0.9},
		{name: "wrapped single", in: `{"experience":` + one + `}`, n: 1, steps: []int{2, 4}, conf: 0.9},
		{name: "code fence", in: "Here you go:\n```json\n{\"experiences\":[" + one + "]}\n```\nHope it helps.", n: 1, steps: []int{2, 4}, conf: 0.9},
		{name: "prose around", in: "Sure! " + `{"experiences":[` + one + `]}` + " That is all.", n: 1, steps: []int{2, 4}, conf: 0.9},
		{name: "footnote bracket before", in: "See [1] below.\n[" + one + "]", n: 1, steps: []int{2, 4}, conf: 0.9},
		{name: "empty list", in: `{"experiences": []}`, n: 0},
		{name: "null list", in: `{"experiences": null}`, n: 0},
		{name: "empty object", in: `{}`, n: 0},
		{name: "strings for numbers", in: `[{"lesson":"x y z w","situation":"s","confidence":"0.75","source_steps":"3, 5"}]`, n: 1, steps: []int{3, 5}, conf: 0.75},
		{name: "percent", in: `[{"lesson":"x","situation":"s","confidence":"80%","source_steps":7}]`, n: 1, steps: []int{7}, conf: 0.8},
		{name: "percent number", in: `[{"lesson":"x","situation":"s","confidence":85,"steps":["#1","#2"]}]`, n: 1, steps: []int{1, 2}, conf: 0.85},
		{name: "step not a number", in: `[{"lesson":"x","situation":"s","confidence":0.7,"source_steps":["two"]}]`, n: 1, steps: []int{-1}, conf: 0.7},
		{name: "empty", in: "   ", wantErr: true},
		{name: "no json", in: "I cannot find any lessons in this task.", wantErr: true},
		{name: "truncated", in: `{"experiences":[{"lesson":"call`, wantErr: true},
		{name: "list of strings", in: `{"experiences":["be careful"]}`, wantErr: true},
		{name: "wrong list type", in: `{"experiences":"none"}`, wantErr: true},
		{name: "unrelated object", in: `{"answer":42}`, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseExperiences(c.in)
			if c.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed (got %+v)", err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.n {
				t.Fatalf("got %d experiences, want %d", len(got), c.n)
			}
			if c.n == 0 {
				return
			}
			if !slicesEqual(got[0].SourceSteps, c.steps) {
				t.Errorf("steps %v, want %v", got[0].SourceSteps, c.steps)
			}
			if math.Abs(got[0].Confidence-c.conf) > 1e-9 {
				t.Errorf("confidence %v, want %v", got[0].Confidence, c.conf)
			}
		})
	}
}

func TestParseMissingConfidenceIsNaN(t *testing.T) {
	got, err := ParseExperiences(`[{"lesson":"x","situation":"s","source_steps":[1]}]`)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if !math.IsNaN(got[0].Confidence) {
		t.Fatalf("confidence %v, want NaN so validation drops it", got[0].Confidence)
	}
}

func FuzzParseExperiences(f *testing.F) {
	for _, s := range []string{
		`{"experiences":[{"lesson":"a","situation":"b","confidence":0.7,"source_steps":[1]}]}`,
		"```json\n[{\"lesson\":\"x\"}]\n```",
		`prose {"lesson":"x","source_steps":"1,2"} prose`,
		`[[[`, `{"experiences":{"lesson":1}}`, "```", `{"a":[1,{"b":null}]}`,
		`[{"confidence":"1e309","source_steps":[1e20, -0, "NaN"]}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseExperiences(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if got != nil {
				t.Fatalf("experiences with an error")
			}
			return
		}
		for _, e := range got {
			if !math.IsNaN(e.Confidence) && (math.IsInf(e.Confidence, 0)) {
				t.Fatalf("infinite confidence from %q", s)
			}
			if strings.ContainsRune(e.Lesson, 0) && !strings.ContainsRune(s, 0) && !strings.Contains(s, `\u0000`) {
				t.Fatalf("NUL invented in lesson")
			}
		}
	})
}

func BenchmarkParseExperiences(b *testing.B) {
	one := `{"situation":"s","action":"a","result":"r","lesson":"Call login before list_orders","confidence":0.9,"source_steps":[2,4],"tool":"list_orders"}`
	in := "Sure, here they are:\n```json\n{\"experiences\":[" + strings.Repeat(one+",", 4) + one + "]}\n```"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseExperiences(in); err != nil {
			b.Fatal(err)
		}
	}
}
