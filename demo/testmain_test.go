package demo

import (
	"os"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestMain removes the hindsight binaries the tests built.
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
