package memory

import (
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/traces"
)

// FuzzParseExperiences feeds arbitrary bytes to the import parser: it
// returns experiences that each have an id and a lesson, or an error; it
// never panics.
func FuzzParseExperiences(f *testing.F) {
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f.Add([]byte(tasktest.ExperienceLine("e1", "read_file", "Call read_file with an absolute path.", day)))
	f.Add([]byte(tasktest.ExperienceLine("e1", "a", "b", day) + "\n\n" + tasktest.ExperienceLine("e2", "c", "d", day)))
	f.Add([]byte(`{"id":"x","lesson":""}`))
	f.Add([]byte(`{"id":"a/b","lesson":"l"}`))
	f.Add([]byte("{not json\n"))
	f.Add([]byte(`{"id":"x","lesson":"l","confidence":"high"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := ParseExperiences(data)
		if err != nil {
			if list != nil {
				t.Fatalf("error %v with %d experiences", err, len(list))
			}
			return
		}
		for _, e := range list {
			if e.ID == "" || e.Lesson == "" || !traces.ValidID(e.ID) {
				t.Fatalf("accepted %+v", e)
			}
		}
	})
}
