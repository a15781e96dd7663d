package platformcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeGo stands in for go test and for the binaries' build (the real ones
// take the whole suite's time); every other go command is the real one.
// Each go test call is logged with the environment the tests would see,
// and answers one JSON event with the result $FAKE_RESULT.
const fakeGo = `#!/usr/bin/env bash
case "$1" in
test)
	{ echo "test $*"; echo "weaviate=${HINDSIGHT_WEAVIATE_BIN:-} bins=${HINDSIGHT_TEST_BIN_DIR:-}"; } >>"$FAKE_LOG"
	printf '{"Action":"output","Package":"p","Output":"%s\\tp\\t1.0s\\n"}\n{"Action":"%s","Package":"p","Elapsed":1}\n' \
		"$([ "$FAKE_RESULT" = pass ] && echo ok || echo FAIL)" "$FAKE_RESULT" ;;
build)
	case "$*" in *slowest*) exec "$REAL_GO" "$@" ;; esac
	mkdir -p "$3" && touch "$3/hindsight" "$3/hindsightd" ;;
*) exec "$REAL_GO" "$@" ;;
esac
`

// fakeMake answers vet-cross with $FAKE_VET and builds a stand-in Weaviate.
const fakeMake = `#!/usr/bin/env bash
echo "make $*" >>"$FAKE_LOG"
case "$*" in
*vet-cross*) exit "$FAKE_VET" ;;
*weaviate*) for a; do case $a in WEAVIATE=*) w=${a#WEAVIATE=} ;; esac; done
	sleep 1; touch "$w" && chmod +x "$w" ;;
esac
`

// runCITest runs .ci/test with the fakes and returns its exit status, its
// output and the fakes' log.
func runCITest(t *testing.T, vet, result string) (int, string, string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip(".ci/test is a bash script")
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"go": fakeGo, "make": fakeMake} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(dir, "log")
	cmd := exec.Command("bash", filepath.Join("..", "..", ".ci", "test"))
	cmd.Env = append(os.Environ(), "GO="+filepath.Join(dir, "go"), "MAKE="+filepath.Join(dir, "make"), "REAL_GO="+realGo,
		"WEAVIATE="+filepath.Join(dir, "weaviate-server"), "OUT="+filepath.Join(dir, "out"), "TEST_FLAGS=-race",
		"FAKE_LOG="+log, "FAKE_VET="+vet, "FAKE_RESULT="+result, "HINDSIGHT_WEAVIATE_BIN=", "HINDSIGHT_TEST_BIN_DIR=")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	return code, string(out), string(b)
}

// TestCITestPhases: make test vets, builds Weaviate alongside, tests the
// packages without Weaviate first, then those with it (and only them
// with HINDSIGHT_WEAVIATE_BIN), every package with the shared binaries,
// and ends with the summary.
func TestCITestPhases(t *testing.T) {
	code, out, log := runCITest(t, "0", "pass")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var tests []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "test ") || strings.HasPrefix(l, "weaviate=") {
			tests = append(tests, l)
		}
	}
	if len(tests) != 4 {
		t.Fatalf("go test calls:\n%s", log)
	}
	const module = "github.com/hindsight-proxy/hindsight/"
	weaviatePkgs := []string{module + "store/weaviate", module + "e2e", module + "reflect"}
	for _, p := range weaviatePkgs {
		if strings.Contains(tests[0]+" ", " "+p+" ") || !strings.Contains(tests[2]+" ", " "+p+" ") {
			t.Errorf("%s is not tested (only) in the Weaviate phase:\n%s", p, log)
		}
	}
	if !strings.Contains(tests[0], " "+module+"proxy ") || !strings.Contains(tests[0], "-race -json") {
		t.Errorf("first phase: %s", tests[0])
	}
	if !strings.HasPrefix(tests[1], "weaviate= bins=/") || !strings.HasPrefix(tests[3], "weaviate=/") || !strings.Contains(tests[3], " bins=/") {
		t.Errorf("environments: %q, %q", tests[1], tests[3])
	}
	for _, want := range []string{"make --no-print-directory GO=", "vet-cross", "weaviate"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	for _, want := range []string{"ok\tp\t1.0s\n", "slowest tests:", "packages: 2 passed, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCITestFailures: a failing phase does not stop the others, and the
// script fails naming every failed phase.
func TestCITestFailures(t *testing.T) {
	code, out, log := runCITest(t, "1", "fail")
	if code != 1 {
		t.Errorf("exit %d, want 1\n%s", code, out)
	}
	if n := strings.Count(log, "test test "); n != 2 {
		t.Errorf("%d go test calls after the failures, want 2:\n%s", n, log)
	}
	if !strings.Contains(out, "FAIL: make test: vet-cross tests without Weaviate tests with Weaviate\n") {
		t.Errorf("the failed phases are not named:\n%s", out)
	}
}
