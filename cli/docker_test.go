package cli

import (
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"go.yaml.in/yaml/v3"
)

// compose is the part of docker-compose.yml the test reads.
type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       string            `yaml:"build"`
		Command     []string          `yaml:"command"`
		Ports       []string          `yaml:"ports"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

func readRootFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbin.Root(), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDockerFilesAgree checks the Dockerfile and docker-compose.yml against
// the code, as no container engine runs here: the Go version, the build
// command and the version variable it sets, the daemon's flags, the ports,
// the Weaviate version the tests run, and every environment name.
func TestDockerFilesAgree(t *testing.T) {
	docker := readRootFile(t, "Dockerfile")
	var c compose
	if err := yaml.Unmarshal([]byte(readRootFile(t, "docker-compose.yml")), &c); err != nil {
		t.Fatal(err)
	}
	gomod := readRootFile(t, "go.mod")

	// The builder's Go is go.mod's.
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(gomod)
	if goVer == nil || !strings.Contains(docker, "FROM golang:"+goVer[1]+"-") {
		t.Errorf("the build stage is not golang:%v", goVer)
	}
	// Both binaries, static, with the version where the CLI keeps it.
	module := regexp.MustCompile(`(?m)^module (\S+)`).FindStringSubmatch(gomod)[1]
	for _, want := range []string{"CGO_ENABLED=0 go build", "-X " + module + "/cli.version=", "./cmd/hindsight ", "./cmd/hindsightd"} {
		if !strings.Contains(docker, want) {
			t.Errorf("the Dockerfile's build lacks %q", want)
		}
	}
	_ = version // the variable the -X sets
	for _, dir := range []string{"cmd/hindsight", "cmd/hindsightd"} {
		if _, err := os.Stat(filepath.Join(testbin.Root(), dir, "main.go")); err != nil {
			t.Errorf("the Dockerfile builds ./%s: %v", dir, err)
		}
	}
	if !strings.Contains(docker, `ENTRYPOINT ["/usr/local/bin/hindsightd"]`) || !strings.Contains(docker, "/out/hindsightd /usr/local/bin/") {
		t.Error("the entry point is not the full build copied from the build stage")
	}

	// The daemon's flags in CMD exist, and its metrics port is the one
	// exposed and published (on the host's loopback).
	cmdLine := regexp.MustCompile(`(?m)^CMD (\[.*\])$`).FindStringSubmatch(docker)
	if cmdLine == nil {
		t.Fatal("no CMD")
	}
	var args []string
	if err := yaml.Unmarshal([]byte(cmdLine[1]), &args); err != nil || len(args) == 0 || args[0] != "daemon" {
		t.Fatalf("CMD %s: %v", cmdLine[1], err)
	}
	help, _ := exec.Command(testbin.Hindsight(t), "daemon", "--help").CombinedOutput()
	port := ""
	for i, a := range args[1:] {
		if strings.HasPrefix(a, "--") && !strings.Contains(string(help), " "+a+" ") {
			t.Errorf("CMD passes %s, which hindsight daemon does not take:\n%s", a, help)
		}
		if a == "--metrics-listen" && i+2 < len(args) {
			port = args[i+2][strings.LastIndex(args[i+2], ":")+1:]
		}
	}
	if port == "" || !strings.Contains(docker, "EXPOSE "+port+"\n") {
		t.Errorf("the metrics port %q is not the one exposed", port)
	}
	hs, ok := c.Services["hindsight"]
	if !ok || hs.Build != "." {
		t.Fatal("docker-compose.yml has no hindsight service built from the Dockerfile")
	}
	if len(hs.Ports) != 1 || hs.Ports[0] != "127.0.0.1:"+port+":"+port {
		t.Errorf("hindsight publishes %v, want 127.0.0.1:%s:%s", hs.Ports, port, port)
	}

	// Weaviate: the version the tests run, its ports as the daemon is told
	// (the node the daemon's URL names).
	u, err := url.Parse(hs.Environment["HINDSIGHT_WEAVIATE_URL"])
	if err != nil {
		t.Fatalf("HINDSIGHT_WEAVIATE_URL: %v", err)
	}
	node := u.Hostname()
	wv, ok := c.Services[node]
	if !ok {
		t.Fatalf("the daemon's HINDSIGHT_WEAVIATE_URL names %q, which is no service", node)
	}
	mk := regexp.MustCompile(`(?m)^WEAVIATE_VERSION := v(\S+)`).FindStringSubmatch(readRootFile(t, "Makefile"))
	if mk == nil || !strings.HasSuffix(wv.Image, ":"+mk[1]) {
		t.Errorf("weaviate image %s, the tests run %v", wv.Image, mk)
	}
	httpPort := ""
	for i, a := range wv.Command {
		if a == "--port" && i+1 < len(wv.Command) {
			httpPort = wv.Command[i+1]
		}
	}
	if u.Port() != httpPort {
		t.Errorf("HINDSIGHT_WEAVIATE_URL %q, weaviate serves HTTP on %s", hs.Environment["HINDSIGHT_WEAVIATE_URL"], httpPort)
	}
	grpc := hs.Environment["HINDSIGHT_WEAVIATE_GRPC"]
	published := strings.Join(wv.Ports, " ")
	if !strings.HasPrefix(grpc, node+":") || !strings.Contains(published, ":"+strings.TrimPrefix(grpc, node+":")) ||
		!strings.Contains(published, ":"+httpPort+":"+httpPort) {
		t.Errorf("weaviate publishes %v; the daemon is told %s and %s", wv.Ports, grpc, u)
	}

	// Every environment name given to Hindsight is one the code reads.
	names := []string{}
	for k := range hs.Environment {
		names = append(names, k)
	}
	for _, m := range regexp.MustCompile(`(?m)^ENV (\w+)=`).FindAllStringSubmatch(docker, -1) {
		names = append(names, m[1])
	}
	var src strings.Builder
	_ = filepath.WalkDir(testbin.Root(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			b, _ := os.ReadFile(p)
			src.Write(b)
		}
		return nil
	})
	for _, n := range names {
		if !strings.Contains(src.String(), `"`+n+`"`) {
			t.Errorf("the environment name %s is read nowhere in the code", n)
		}
	}
}
