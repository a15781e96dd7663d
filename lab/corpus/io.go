package corpus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hindsight-proxy/hindsight"
)

// File names in a corpus directory.
const (
	TracesFile = "traces.jsonl"
	LabelsFile = "labels.jsonl"
)

// Label is the ground truth about one failed tools/call step: which error
// class it belongs to, how the agent recovered, and the step index of the
// successful call of the same tool that recovered (-1 if none did).
type Label struct {
	TaskID      string `json:"task_id"`
	StepIndex   int    `json:"step_index"`
	Server      string `json:"server"`
	Tool        string `json:"tool"`
	ErrorClass  string `json:"error_class"`
	Recovery    string `json:"recovery"` // one of the Recovery constants
	RecoveredAt int    `json:"recovered_at"`
}

// Write writes steps to dir/traces.jsonl and labels to dir/labels.jsonl,
// one json.Marshal'd value per line, creating dir if needed.
func Write(dir string, steps []hindsight.Step, labels []Label) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, TracesFile), jsonLines(steps), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, LabelsFile), jsonLines(labels), 0o644)
}

// Encode returns the contents Write gives traces.jsonl and labels.jsonl.
func Encode(steps []hindsight.Step, labels []Label) (traces, labelLines []byte) {
	return jsonLines(steps), jsonLines(labels)
}

func jsonLines[T any](vs []T) []byte {
	b, err := JSONLines(vs)
	if err != nil {
		panic("corpus: " + err.Error()) // only valid JSON bodies are generated
	}
	return b
}

// JSONLines returns vs as JSON Lines: each value as json.Marshal writes
// it, then a newline.
func JSONLines[T any](vs []T) ([]byte, error) {
	var b bytes.Buffer
	for i := range vs {
		line, err := json.Marshal(&vs[i])
		if err != nil {
			return nil, fmt.Errorf("encode line %d: %w", i+1, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// Load reads the steps and labels Write wrote to dir.
func Load(dir string) (steps []hindsight.Step, labels []Label, err error) {
	if steps, err = readLines[hindsight.Step](filepath.Join(dir, TracesFile)); err != nil {
		return nil, nil, err
	}
	if labels, err = readLines[Label](filepath.Join(dir, LabelsFile)); err != nil {
		return nil, nil, err
	}
	return steps, labels, nil
}

func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	r := bufio.NewReaderSize(f, 1<<16)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var v T
			if err := json.Unmarshal(line, &v); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			out = append(out, v)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// compact returns the JSON text s without insignificant whitespace.
func compact(s string) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic("corpus: invalid JSON: " + err.Error())
	}
	return b.Bytes()
}
