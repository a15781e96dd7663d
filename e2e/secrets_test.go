//go:build unix

package e2e

// The whole path of a planted secret through a real sidecar: an MCP client
// sends every fake secret of the corpus through `hindsight wrap` in front
// of mcp-server-everything; the steps go through the outbox to the daemon.
// Then every file under $HINDSIGHT_HOME (Badger value logs and tables of
// the outbox and the daemon, logs) and the output of `traces export` are
// searched for each secret.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestNoSecretReachesHomeThroughRealSidecar(t *testing.T) {
	everything := testbin.NPM(t, "mcp-server-everything")
	bin := testbin.Hindsight(t)
	// Injection is not under test here.
	dir := testbin.HomeWith(t, "inject:\n  instructions: false\n  error_results: false\n  query_tool: false\n")
	home := hindsight.Home(dir)
	if err := home.Ensure(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		t0 := time.Now()
		stopDaemon(home)
		t.Logf("daemon stopped in %v", time.Since(t0).Round(time.Millisecond))
	})
	start := time.Now()

	b, err := os.ReadFile("../capture/testdata/secrets/corpus.json") // the redactor's own corpus
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Cases []struct {
			Name           string          `json:"name"`
			MustNotContain []string        `json:"must_not_contain"`
			Message        json.RawMessage `json:"message"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "wrap", "--name", "everything", "--", everything, "stdio")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+dir)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "secrets-test", Version: "1.0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range corpus.Cases {
		// The whole message travels as the echo argument and comes back
		// in the result, nested JSON and error texts included.
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": string(c.Message)}})
		if err != nil || res.IsError {
			t.Fatalf("%s: echo: %v %+v", c.Name, err, res)
		}
	}
	cs.Close()
	t.Logf("%d echo calls through the sidecar in %v", len(corpus.Cases), time.Since(start).Round(time.Millisecond))

	// Wait for the daemon to hold every echo step.
	client := daemon.NewClient(home.Socket())
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n := 0
		if tasks, err := client.Tasks(ctx, daemon.TaskFilter{}); err == nil {
			for _, task := range tasks {
				if full, err := client.Task(ctx, task.ID); err == nil {
					for _, s := range full.Steps {
						if s.Tool == "echo" {
							n++
						}
					}
				}
			}
		}
		if n >= len(corpus.Cases) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon holds %d echo steps of %d", n, len(corpus.Cases))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("daemon holds every step after %v", time.Since(start).Round(time.Millisecond))
	defer func(t0 time.Time) { t.Logf("export and scan took %v", time.Since(t0).Round(time.Millisecond)) }(time.Now())
	export, err := exec.CommandContext(ctx, bin, "--home", dir, "traces", "export").Output()
	if err != nil {
		t.Fatalf("traces export: %v", err)
	}
	if bytes.Count(export, []byte("\n")) < len(corpus.Cases) {
		t.Fatalf("export has %d lines", bytes.Count(export, []byte("\n")))
	}

	// One Aho-Corasick pass per file over every form of every secret;
	// files (Badger preallocates large sparse ones) are read in chunks.
	var patterns []string
	var owner []string
	for _, c := range corpus.Cases {
		for _, sec := range c.MustNotContain {
			for _, f := range forms(sec) {
				patterns = append(patterns, f)
				owner = append(owner, c.Name)
			}
		}
	}
	trie := ahocorasick.NewTrieBuilder().AddStrings(patterns).Build()
	found, files := 0, 0
	placeholders := 0 // the positive control: redacted steps were read
	report := func(where string, data []byte) {
		placeholders += bytes.Count(data, []byte("[REDACTED:github-pat]"))
		for _, m := range trie.Match(data) {
			found++
			t.Errorf("%s: secret of %s (%.10s…)", where, owner[m.Pattern()], patterns[m.Pattern()])
		}
	}
	report("traces export", export)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		files++
		f, err := os.Open(p)
		if err != nil {
			t.Errorf("open %s: %v", p, err)
			return nil
		}
		defer f.Close()
		where := strings.TrimPrefix(p, dir)
		// Read only the data segments: Badger preallocates large sparse
		// files (SEEK_DATA/SEEK_HOLE; the whole file where unsupported).
		for off := int64(0); ; {
			start, err := f.Seek(off, seekData)
			end := int64(-1)
			switch {
			case errors.Is(err, syscall.ENXIO):
				// no data past off
			case err != nil && off == 0: // no sparse-file support: all of it
				start, end = 0, fileSize(d)
			case err == nil:
				if end, err = f.Seek(start, seekHole); err != nil {
					t.Errorf("seek %s: %v", where, err)
					end = -1
				}
			}
			if end < 0 {
				break
			}
			seg := make([]byte, end-start)
			if _, err := f.ReadAt(seg, start); err != nil && err != io.EOF {
				t.Errorf("read %s: %v", where, err)
				break
			}
			report(where, seg)
			off = end
		}
		return nil
	})
	if files < 5 || placeholders < len(corpus.Cases)/41 {
		t.Fatalf("scanned %d files and found %d placeholders: the scan did not read the stores", files, placeholders)
	}
	t.Logf("scanned %d files and the export for %d planted secrets: %d found (%d placeholders seen)", files, len(corpus.Cases), found, placeholders)
}

func fileSize(d fs.DirEntry) int64 {
	if fi, err := d.Info(); err == nil {
		return fi.Size()
	}
	return 0
}

// lseek whences for sparse files.
const (
	seekData = 3
	seekHole = 4
)

// forms are the ways a secret can appear on disk: raw, and escaped once or
// twice as a JSON string.
func forms(s string) []string {
	once, _ := json.Marshal(s)
	twice, _ := json.Marshal(string(once[1 : len(once)-1]))
	out := []string{s, string(once[1 : len(once)-1]), string(twice[1 : len(twice)-1])}
	return out
}

// stopDaemon ends the daemon the sidecar started for home.
func stopDaemon(home hindsight.Home) {
	pid := daemon.LockHolder(home)
	if pid <= 0 || pid == os.Getpid() {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(15 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestWrapCommandLineSecretsNotLogged: the values of a wrapped server's
// secret-named flags and variables reach no file under the home, whatever
// they look like (no detector would recognise these), while the command is
// still logged.
func TestWrapCommandLineSecretsNotLogged(t *testing.T) {
	bin := testbin.Hindsight(t)
	dir := testbin.Home(t)
	const flagValue, envValue = "plainflagvalue7391", "plainenvvalue8462"
	cmd := exec.Command(bin, "wrap", "--name", "argv", "--",
		"sh", "-c", "exec cat", "sh", "--api-key", flagValue, "GITHUB_TOKEN="+envValue)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+dir)
	cmd.Stdin = strings.NewReader("") // the agent leaves at once
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("wrap: %v\n%s", err, out)
	}
	for _, v := range []string{flagValue, envValue} {
		if bytes.Contains(out, []byte(v)) {
			t.Errorf("wrap printed %s:\n%s", v, out)
		}
	}
	logged := false
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, v := range []string{flagValue, envValue} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds %s", path, v)
			}
		}
		if strings.HasPrefix(filepath.Base(path), "wrap-argv") && bytes.Contains(b, []byte("--api-key")) &&
			bytes.Contains(b, []byte("[REDACTED:flag]")) {
			logged = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !logged {
		t.Error("no wrap log names the command with its flag's value redacted")
	}
}
