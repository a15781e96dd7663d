package daemon

import (
	"errors"
	"testing"
)

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST.": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true, "[::1]": true,
		"0.0.0.0": false, "": false, "10.0.0.1": false, "localhost.evil.example": false, "evil.example": false, "::": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.168.1.5:0"} {
		if _, err := ListenTCP(addr, false); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("ListenTCP(%q): %v, want refused", addr, err)
		}
	}
	for _, addr := range []string{"", ":0", "localhost:0", "127.0.0.1:0"} {
		ln, err := ListenTCP(addr, false)
		if err != nil {
			t.Errorf("ListenTCP(%q): %v", addr, err)
			continue
		}
		ln.Close()
	}
	ln, err := ListenTCP("0.0.0.0:0", true)
	if err != nil {
		t.Fatalf("allowed remote: %v", err)
	}
	ln.Close()
}
