package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ToolBenchServer is the server of the calls whose tool names no RapidAPI
// service (the agent invented them; the harness answers "No such
// function name").
const ToolBenchServer = "toolbench"

// toolBenchNode is a node of a ToolBench DFS answer tree: an "Action"
// names a function, its "Action Input" child holds the arguments and what
// the call returned.
type toolBenchNode struct {
	NodeType    string          `json:"node_type"`
	Description string          `json:"description"`
	Observation *string         `json:"observation"`
	Children    []toolBenchNode `json:"children"`
}

// ToolBench reads one ToolBench answer (data_example/answer/G*_answer/
// *.json: the tree its depth-first search explored over real RapidAPI
// services). The calls are the tree's actions in the order the search
// made them (pre-order), Finish aside. A call's server is the RapidAPI
// service its function name ends with ("…_for_<service>"); its result is
// the observation the agent read ({"error": …, "response": …}), failed
// when error is not empty.
func ToolBench(id string, data []byte) (Task, error) {
	var a struct {
		Tree struct {
			Tree toolBenchNode `json:"tree"`
		} `json:"tree"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return Task{}, fmt.Errorf("read ToolBench answer %s: %w", id, err)
	}
	t := Task{ID: "toolbench-" + id}
	var walk func(n *toolBenchNode, fn string)
	walk = func(n *toolBenchNode, fn string) {
		if n.NodeType == "Action Input" && n.Observation != nil && fn != "" && fn != "Finish" {
			t.Calls = append(t.Calls, toolBenchCall(fn, n.Description, *n.Observation))
		}
		for i := range n.Children {
			c := &n.Children[i]
			next := fn
			if c.NodeType == "Action" {
				next = c.Description
			}
			walk(c, next)
		}
	}
	walk(&a.Tree.Tree, "")
	return t, nil
}

func toolBenchCall(fn, input, observation string) Call {
	server := ToolBenchServer
	if i := strings.LastIndex(fn, "_for_"); i > 0 {
		server = fn[i+len("_for_"):]
	}
	args := json.RawMessage("{}")
	if strings.HasPrefix(strings.TrimSpace(input), "{") && json.Valid([]byte(input)) {
		args = json.RawMessage(input)
	}
	var o struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(observation), &o)
	return Call{Server: server, Tool: fn, Args: args, Text: observation, IsError: o.Error != ""}
}

// ToolBenchDir reads every answer under dir (G1_answer/10_….json becomes
// task toolbench-G1-10), in name order.
func ToolBenchDir(dir string) ([]Task, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read ToolBench answers: %w", err)
	}
	sort.Strings(files)
	var tasks []Task
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read ToolBench answers: %w", err)
		}
		group := strings.TrimSuffix(filepath.Base(filepath.Dir(f)), "_answer")
		num, _, _ := strings.Cut(filepath.Base(f), "_")
		t, err := ToolBench(group+"-"+num, data)
		if err != nil {
			return nil, err
		}
		if len(t.Calls) > 0 {
			tasks = append(tasks, t)
		}
	}
	return tasks, nil
}
