package sample

import "testing"

func TestPasses(t *testing.T) { t.Log("quiet when passing") }

func TestFails(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Error("the sub failed") })
	t.Run("fine", func(t *testing.T) { t.Log("quiet subtest") })
}

func TestSkips(t *testing.T) { t.Skip("skipped here") }

func TestAlsoPasses(t *testing.T) {}
