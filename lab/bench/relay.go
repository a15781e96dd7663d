//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
)

// Relay starts argv as a child and copies bytes both ways between it and
// stdin/stdout until stdin reaches EOF and the child has exited: the floor
// any stdio proxy is measured against. It does nothing with what it copies.
//
// Each direction is a plain read/write loop through a 32 KiB user-space
// buffer (no splice), which is what any proxy that looks at messages must
// at least do. The child's stderr goes to stderr. When ctx is done the
// child is killed.
func Relay(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) == 0 {
		return errors.New("relay: no command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	childIn, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("relay: stdin pipe: %w", err)
	}
	childOut, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("relay: stdout pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("relay: start %s: %w", argv[0], err)
	}
	// The agent → child copy ends at stdin's EOF; if the child exits first
	// it is left blocked on a read of stdin, which the caller owns.
	go func() {
		copyPlain(childIn, stdin)
		childIn.Close() // EOF to the child: it exits, which ends the other direction
	}()
	_, outErr := copyPlain(stdout, childOut)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("relay: %s: %w", argv[0], err)
	}
	if outErr != nil {
		return fmt.Errorf("relay: copy to agent: %w", outErr)
	}
	return nil
}

// copyPlain copies src to dst with read and write calls through a buffer,
// hiding ReaderFrom/WriterTo so io.Copy cannot switch to splice.
func copyPlain(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
}
