//go:build linux

package faults

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// TestCrashLoopVisible crashes the wrapped server on every call, past the
// log's burst: every call is answered, the log keeps reporting the loop
// (a line that counts what it suppressed), and status --json shows the
// server's starts and crashes.
func TestCrashLoopVisible(t *testing.T) {
	home := plainHome(t)
	a := wrapFake(t, home)
	a.initialize()
	const crashes = 8
	for i := range crashes {
		a.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"crash","arguments":{"status":3}}}`, 100+i))
		if got := a.Recv(); !strings.Contains(got, fmt.Sprintf(`"id":%d,"error"`, 100+i)) {
			t.Fatalf("crash %d answered %s", i, got)
		}
	}
	a.echoCalls("alive", 0, 1, 10, 1)
	testkit.WaitFor(t, "status to show the crash loop", time.Minute, func() bool {
		for _, o := range status(t, home).Outboxes {
			if s := o.Stats; s != nil && s.Server == "fake" && s.ServerCrashes >= crashes && s.ServerStarts > crashes && s.LastCrashAt != nil {
				return true
			}
		}
		return false
	})
	// The sixth and later crashes are past the burst: a line reports them.
	suppressed := regexp.MustCompile(`"suppressed":([1-9][0-9]*)`)
	testkit.WaitFor(t, "a log line counting the suppressed crashes", time.Minute, func() bool {
		b, _ := os.ReadFile(home.Path("logs", "wrap-fake.log"))
		for _, m := range suppressed.FindAllSubmatch(b, -1) {
			if n, _ := strconv.Atoi(string(m[1])); n > 0 {
				return true
			}
		}
		return false
	})
}
