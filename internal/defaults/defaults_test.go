package defaults

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	if got := Positive(0, 5); got != 5 {
		t.Errorf("Positive(0, 5) = %d", got)
	}
	if got := Positive(-1*time.Second, time.Minute); got != time.Minute {
		t.Errorf("negative duration: got %v", got)
	}
	if got := Positive(0.25, 0.6); got != 0.25 {
		t.Errorf("set float: got %v", got)
	}
	if got := Positive(int64(7), 9); got != 7 {
		t.Errorf("set int64: got %d", got)
	}
}
