//go:build unix

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

func TestNamesFakeServer(t *testing.T) { fakeserver.Main() }

// randomOf is n random bytes of alphabet (a fresh fake secret each run).
func randomOf(n int, alphabet string) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// TestSecretsInNamesReachNoFile plants secrets in a server's name (--name,
// which names its log file), in the session's task id
// (HINDSIGHT_TASK_ID), in a request's task id
// (_meta["io.hindsight/task"]) and in the server's command line, runs a
// real sidecar and its daemon, and finds none of them in any file under
// the home or in `traces export`, while the steps are stored under the
// redacted names.
func TestSecretsInNamesReachNoFile(t *testing.T) {
	bin := testbin.Hindsight(t)
	home := testbin.Home(t)
	start := time.Now()
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	inName := "sk-proj-" + randomOf(156, alnum+"_-") // no gitleaks marker
	inEnv := "ghp_" + randomOf(36, alnum)
	inMeta := "sk-" + randomOf(48, alnum)
	inArgv := "plain" + randomOf(20, alnum)
	// Aa1 makes every key random-looking whatever the draw gave.
	inName, inMeta = inName[:20]+"Aa1"+inName[23:], inMeta[:10]+"Aa1"+inMeta[13:]

	args := append([]string{"wrap", "--name", "srv-" + inName, "--", os.Args[0]}, fakeserver.Args("TestNamesFakeServer")...)
	cmd := exec.Command(bin, append(args, "serve", "--api-key", inArgv)...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home, "HINDSIGHT_TASK_ID=job-"+inEnv)
	cmd.Env = append(cmd.Env, fakeserver.Vars(fakeserver.ModeMCP, "", "")...)
	in, out := testkit.StartPiped(t, cmd)
	a := &agent{t: t, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	a.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"names-test","version":"1"}}}`)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	a.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r := a.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.hindsight/task":"run-` + inMeta + `"}}}`); r["result"] == nil {
		t.Fatalf("echo through the sidecar: %s", r["error"])
	}
	a.stop()
	t.Logf("sidecar ran %v", time.Since(start))

	// Both tasks reach the daemon, under their redacted ids.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := daemon.NewClient(hindsight.Home(home).Socket())
	var ids []string
	testkit.WaitFor(t, "the daemon to hold the sidecar's two tasks", time.Minute, func() bool {
		tasks, err := client.Tasks(ctx, daemon.TaskFilter{})
		ids = ids[:0]
		for _, task := range tasks {
			ids = append(ids, task.ID)
		}
		return err == nil && len(tasks) >= 2
	})
	for _, want := range []string{"job-[REDACTED:github-pat]", "run-[REDACTED:openai-api-key]"} {
		task, err := client.Task(ctx, want)
		if err != nil {
			t.Errorf("task %s: %v (tasks: %q)", want, err, ids)
			continue
		}
		if s := task.Steps[0]; s.Server != "srv-[REDACTED:openai-api-key]" {
			t.Errorf("task %s: server %q", want, s.Server)
		}
	}
	t.Logf("daemon holds the tasks after %v", time.Since(start))
	export := testbin.Run(t, home, false, "traces", "export")
	logs, _ := filepath.Glob(filepath.Join(home, "logs", "wrap-srv-*"))
	if len(logs) == 0 {
		t.Errorf("no log file wrap-srv-*: %v", filesHolding(t, home, ""))
	}
	var paths []string
	filepath.WalkDir(home, func(p string, _ os.DirEntry, _ error) error { paths = append(paths, p); return nil })
	for _, sec := range []string{inName, inEnv, inMeta, inArgv} {
		for _, p := range paths {
			if strings.Contains(p, sec) {
				t.Errorf("a file is named after %.12s…: %s", sec, p)
			}
		}
		if hits := filesHolding(t, home, sec); len(hits) > 0 {
			t.Errorf("%.12s… is in %v", sec, hits)
		}
		if strings.Contains(export, sec) {
			t.Errorf("%.12s… is in traces export", sec)
		}
	}
}

// TestWrapLogLinkNotFollowed: a symbolic link at a sidecar's log file path
// is not followed: a real wrap leaves the link's target as it was, and its
// log, a regular file in the link's place, says what happened.
func TestWrapLogLinkNotFollowed(t *testing.T) {
	bin := testbin.Hindsight(t)
	home := testbin.Home(t)
	if err := hindsight.Home(home).Ensure(); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(testkit.ShortTempDir(t), "bashrc")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, "logs", "wrap-linked.log")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "wrap", "--name", "linked", "--", "sh", "-c", "exec cat")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home)
	cmd.Stdin = strings.NewReader("")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wrap: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Errorf("the link's target was written to: %q", b)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the log's path: %v, %v; want a regular file", fi, err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "was a symbolic link") || !strings.Contains(string(b), "wrap starting") {
		t.Errorf("the log does not say the link was replaced, or holds no line of the sidecar:\n%s", b)
	}
}
