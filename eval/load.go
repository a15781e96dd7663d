package eval

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hindsight-proxy/hindsight"
)

// LabelsFile is the name of the labels file Load reads beside a trace
// export, or inside a directory of them.
const LabelsFile = "labels.jsonl"

// label is one line of a labels file.
type label struct {
	TaskID     string `json:"task_id"`
	StepIndex  int    `json:"step_index"`
	ErrorClass string `json:"error_class"`
}

// Load reads the steps of a trace export (JSONL, one step a line, as
// `hindsight traces export` writes it), or of every *.jsonl file of a
// directory but the labels, and the labels beside them (nil when there is
// no labels file). Lines are numbered in errors.
func Load(path string) ([]hindsight.Step, map[StepRef]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load traces: %w", err)
	}
	dir, files := filepath.Dir(path), []string{path}
	if info.IsDir() {
		dir, files = path, nil
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") && filepath.Base(p) != LabelsFile {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("load traces: %w", err)
		}
		sort.Strings(files)
	}
	var steps []hindsight.Step
	for _, f := range files {
		err := eachLine(f, func(b []byte) error {
			var s hindsight.Step
			if err := json.Unmarshal(b, &s); err != nil {
				return err
			}
			if s.TaskID == "" {
				return errors.New("step without task_id")
			}
			steps = append(steps, s)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if len(steps) == 0 {
		return nil, nil, fmt.Errorf("load traces: no steps in %s", path)
	}
	var labels map[StepRef]string
	lp := filepath.Join(dir, LabelsFile)
	if _, err := os.Stat(lp); err == nil {
		labels = map[StepRef]string{}
		err := eachLine(lp, func(b []byte) error {
			var l label
			if err := json.Unmarshal(b, &l); err != nil {
				return err
			}
			labels[StepRef{l.TaskID, l.StepIndex}] = l.ErrorClass
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return steps, labels, nil
}

// eachLine calls fn with each non-blank line of the file at path.
func eachLine(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load traces: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		if err := fn(b); err != nil {
			return fmt.Errorf("load traces: %s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("load traces: %s: %w", path, err)
	}
	return nil
}
