package traces

import (
	"reflect"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"
)

// TestTaskRecUpdate checks that a cached record updated to a later state
// of its task equals that state and keeps none of the request's memory
// that state's strings were views of.
func TestTaskRecUpdate(t *testing.T) {
	body := []byte("s1s2srvBgrp2")
	view := func(i, j int) string { return wire.StringView(body[i:j]) }
	cases := map[string]func(rec *taskRec){
		"unchanged":      func(rec *taskRec) {},
		"new session":    func(rec *taskRec) { rec.Sessions[view(2, 4)] = false },
		"session closed": func(rec *taskRec) { rec.Sessions[view(0, 2)] = true },
		"new server":     func(rec *taskRec) { rec.Servers = append(rec.Servers, view(4, 8)) },
		"new group":      func(rec *taskRec) { rec.Group = view(8, 12) },
		"no sessions":    func(rec *taskRec) { rec.Sessions = nil },
		"empty sessions": func(rec *taskRec) { rec.Sessions = map[string]bool{} },
		"no servers":     func(rec *taskRec) { rec.Servers = nil },
		"empty servers":  func(rec *taskRec) { rec.Servers = []string{} },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			copy(body, "s1s2srvBgrp2")
			prev := &taskRec{
				Task:     hindsight.Task{ID: "t1", Servers: []string{"srvA"}, StepCount: 3},
				Group:    "grp1",
				Sessions: map[string]bool{"s1": false},
			}
			rec := prev.copy()
			rec.StepCount++
			change(rec)
			want := rec.clone()
			prev.update(rec)
			for i := range body {
				body[i] = 'x' // the request's body, reused
			}
			if !reflect.DeepEqual(prev, want) {
				t.Errorf("updated %+v, want %+v", prev, want)
			}
			if (prev.Sessions == nil) != (want.Sessions == nil) || (prev.Servers == nil) != (want.Servers == nil) {
				t.Errorf("nil-ness: sessions %v servers %v, want %v %v", prev.Sessions, prev.Servers, want.Sessions, want.Servers)
			}
		})
	}
}
