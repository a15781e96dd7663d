package daemon

import (
	"slices"
	"testing"
)

// TestDaemonEnv: EnsureRunning's daemon gets the caller's environment,
// its home, and GOMAXPROCS=1 unless the caller set it.
func TestDaemonEnv(t *testing.T) {
	for _, c := range []struct {
		env, want []string
	}{
		{[]string{"PATH=/bin"}, []string{"PATH=/bin", "HINDSIGHT_HOME=/h", "GOMAXPROCS=1"}},
		{[]string{"GOMAXPROCS=4", "PATH=/bin"}, []string{"GOMAXPROCS=4", "PATH=/bin", "HINDSIGHT_HOME=/h"}},
		{[]string{"HINDSIGHT_HOME=/old"}, []string{"HINDSIGHT_HOME=/old", "HINDSIGHT_HOME=/h", "GOMAXPROCS=1"}},
	} {
		in := slices.Clone(c.env)
		if got := daemonEnv(in, "/h"); !slices.Equal(got, c.want) {
			t.Errorf("daemonEnv(%q) = %q; want %q", c.env, got, c.want)
		}
		if !slices.Equal(in, c.env) {
			t.Errorf("daemonEnv changed its argument: %q", in)
		}
	}
}
