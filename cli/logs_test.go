package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestWrapLogsNoSecrets runs a real `hindsight wrap` in front of a server
// that prints secrets on its stderr (and gets one on its command line),
// then floods it: no secret reaches a file under logs/, the lines
// themselves do, and the flood is cut with a summary.
func TestWrapLogsNoSecrets(t *testing.T) {
	secrets := []string{
		"ghp_Zk3qR8vT2mW9xY4nB6cD1eF5gH7jK0lPq2sT",                 // GitHub token on the command line and stderr
		"sk-proj-Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0X1c2V3b4", // in a key=value pair
		"hunter2hunter2", // a password in a URL
	}
	script := `echo "starting with token $1" >&2
echo "OPENAI_API_KEY=` + secrets[1] + `" >&2
echo "connecting to postgres://app:` + secrets[2] + `@db.internal:5432/app" >&2
i=0; while [ $i -lt 1000 ]; do echo "noise line $i" >&2; i=$((i+1)); done
cat >/dev/null`
	home := t.TempDir()
	testbin.StopDaemon(t, home)
	// A slow refill: however slowly the machine runs the flood, most of
	// it is over the limit.
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("logs:\n  rate: 0.5\n  burst: 100\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Hindsight(t), "--home", home, "wrap", "--name", "leaky", "--", "sh", "-c", script, "sh", secrets[0])
	cmd.Env = append(os.Environ(), "HINDSIGHT_CAPTURE=off")
	cmd.Stdin = strings.NewReader("") // the agent leaves at once: the child's stdin closes
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("wrap: %v\n%s", err, stderr.String())
	}
	logs, err := os.ReadDir(filepath.Join(home, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, e := range logs {
		b, err := os.ReadFile(filepath.Join(home, "logs", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds the secret %s", e.Name(), s)
			}
		}
		all = append(all, b...)
	}
	for _, want := range []string{`"line":"starting with token [REDACTED`, "db.internal", "noise line 0", `"msg":"log lines suppressed"`} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("the logs lack %q", want)
		}
	}
	if n := bytes.Count(all, []byte("noise line")); n >= 500 {
		t.Errorf("%d noise lines logged: no rate limit", n)
	}
	if t.Failed() {
		t.Logf("logs:\n%s", all)
	}
}

// TestServeRemoteNeedsToken: `hindsight serve --allow-remote` without a
// token refuses to start (exit 2), saying why, and never listens.
func TestServeRemoteNeedsToken(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(testbin.Hindsight(t), "--home", home, "serve", "--listen", "0.0.0.0:0", "--allow-remote",
		"--upstream", "http://127.0.0.1:9/mcp")
	cmd.Env = append(os.Environ(), "HINDSIGHT_AUTH_TOKEN=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "--allow-remote needs --auth-token") {
		t.Fatalf("serve --allow-remote without a token: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "on http://") {
		t.Errorf("it served: %s", stderr.String())
	}
}
