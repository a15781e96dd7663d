package wire

import (
	"os/exec"
	"testing"
)

//go:generate go run genstep.go

// TestStepCodec: step_gen.go is what genstep.go writes from stepFields,
// which lists the Step's fields.
func TestStepCodec(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	if out, err := exec.Command(goTool, "run", "genstep.go", "-check").CombinedOutput(); err != nil {
		t.Fatalf("go run genstep.go -check: %v\n%s", err, out)
	}
}
