package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// sampleEvents runs `go test -json` on testdata/sample, a module with
// passing, failing and skipped tests, and returns its events.
func sampleEvents(t *testing.T) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go test")
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", ".")
	cmd.Dir = "testdata/sample"
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); !ok && err != nil {
		t.Fatalf("go test: %v", err)
	}
	if err == nil {
		t.Fatal("go test of the sample passed; its TestFails must fail")
	}
	return out
}

func TestFilter(t *testing.T) {
	events := sampleEvents(t)
	var out, raw bytes.Buffer
	e := newEchoer(&out)
	if err := readEvents(bytes.NewReader(events), &raw, e.add, func(l []byte) { out.Write(l) }); err != nil {
		t.Fatal(err)
	}
	e.finish()
	if !bytes.Equal(raw.Bytes(), events) {
		t.Error("the saved events differ from the input")
	}
	if !e.failed {
		t.Error("a failed test did not fail the filter")
	}
	got := out.String()
	for _, want := range []string{"--- FAIL: TestFails", "--- FAIL: TestFails/sub", "the sub failed", "FAIL\texample.com/sample"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, hidden := range []string{"quiet when passing", "TestPasses", "skipped here", "PASS\n"} {
		if strings.Contains(got, hidden) {
			t.Errorf("output shows %q, which plain go test hides:\n%s", hidden, got)
		}
	}
}

func TestSummary(t *testing.T) {
	var s summary
	if err := readEvents(bytes.NewReader(sampleEvents(t)), &bytes.Buffer{}, s.add, func([]byte) {}); err != nil {
		t.Fatal(err)
	}
	if s.passedTests != 2 || s.failedTests != 1 || s.skipTests != 1 || s.failedPkgs != 1 {
		t.Errorf("counts: %+v", s)
	}
	var out bytes.Buffer
	s.write(&out, 2)
	got := out.String()
	for _, want := range []string{"failed: example.com/sample TestFails\n", "failed: example.com/sample TestFails/sub\n",
		"packages: 0 passed, 1 failed", "tests: 2 passed, 1 failed, 1 skipped"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if tests := strings.Count(got[:strings.Index(got, "slowest packages:")], "example.com/sample Test"); tests != 2 {
		t.Errorf("summary lists %d slowest tests, want 2 (-n):\n%s", tests, got)
	}
}

// TestFilterTimeout: the tests a package's panic or timeout cut short
// have their output shown, before the package's FAIL line.
func TestFilterTimeout(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestHangs"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"=== RUN   TestHangs\n"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"    hang_test.go:9: waiting\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.0s\n"}
{"Action":"fail","Package":"p","Elapsed":1}
`
	var out bytes.Buffer
	e := newEchoer(&out)
	if err := readEvents(strings.NewReader(in), &bytes.Buffer{}, e.add, func(l []byte) { out.Write(l) }); err != nil {
		t.Fatal(err)
	}
	want := "=== RUN   TestHangs\n    hang_test.go:9: waiting\npanic: test timed out after 1s\nFAIL\tp\t1.0s\n"
	if out.String() != want || !e.failed {
		t.Errorf("output %q (failed %v), want %q", out.String(), e.failed, want)
	}
}

func FuzzReadEvents(f *testing.F) {
	f.Add([]byte(`{"Action":"output","Package":"p","Test":"T/x","Output":"a\n"}` + "\n" + `{"Action":"fail","Package":"p","Test":"T"}`))
	f.Add([]byte("go: downloading x\n{\"Action\":\"pass\",\"Package\":\"p\",\"Elapsed\":1.5}\n"))
	f.Add([]byte(`{"Action":"build-output","ImportPath":"p","Output":"x.go:1: err\n"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out, raw bytes.Buffer
		e := newEchoer(&out)
		var s summary
		err := readEvents(bytes.NewReader(in), &raw, func(ev event) { e.add(ev); s.add(ev) }, func(l []byte) { out.Write(l) })
		if err != nil {
			t.Fatal(err)
		}
		e.finish()
		if !bytes.Equal(raw.Bytes(), in) {
			t.Error("saved events differ from the input")
		}
		if len(e.held) != 0 || len(e.order) != 0 {
			t.Errorf("finish left output held: %v", e.order)
		}
		s.write(&bytes.Buffer{}, 3)
		if n := s.passedTests + s.failedTests + s.skipTests; n != len(s.tests) {
			t.Errorf("%d tests counted, %d timed", n, len(s.tests))
		}
	})
}
