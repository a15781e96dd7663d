package memory

import (
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// FuzzParseImport feeds arbitrary bytes to the pack parser: it returns an
// error, or experiences that are each in the importer's namespace, of
// origin import:PACK, printable, within the confidence cap and with no
// claimed counts; it never panics.
func FuzzParseImport(f *testing.F) {
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f.Add([]byte(tasktest.ExperienceLine("e1", "read_file", "Call read_file with an absolute path.", day)))
	f.Add([]byte(hostileLine("e1") + hostileLine("e2")))
	f.Add([]byte(`{"id":"x","lesson":"l","confidence":0.99,"evidence_count":7,"namespace":"other"}`))
	f.Add([]byte(`{"id":"x","lesson":"\u001b[2J"}`))
	f.Add([]byte("{not json\n"))
	red, err := capture.NewRedactor(capture.RedactorConfig{})
	if err != nil {
		f.Fatal(err)
	}
	opt := ImportOptions{Namespace: "mine", Pack: "team"}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, _, err := ParseImport(data, opt, red, day)
		if err != nil {
			if list != nil {
				t.Fatalf("error %v with %d experiences", err, len(list))
			}
			return
		}
		for _, e := range list {
			if e.Namespace != "mine" || e.Origin != "import:team" || e.Confidence > ImportConfidenceCap ||
				e.EvidenceCount != 0 || e.HitCount != 0 || e.Deleted || e.SupersededBy != "" ||
				e.UpdatedAt.After(day) || e.Lesson != guard.Printable(e.Lesson) || CheckText(&e) != nil {
				t.Fatalf("accepted %+v", e)
			}
		}
	})
}
