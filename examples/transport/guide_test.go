package main

import (
	"os"
	"strings"
	"testing"
)

// The guide shows fleet.go verbatim.
func TestGuideShowsFleetGo(t *testing.T) {
	guide, err := os.ReadFile("../../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(guide), "<!-- fleet.go -->\n```go\n")
	if !ok {
		t.Fatal("docs/guide.md has no <!-- fleet.go --> Go block")
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("the guide's fleet.go block is not closed")
	}
	file, err := os.ReadFile("fleet.go")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(file) {
		t.Errorf("docs/guide.md's Go block differs from examples/transport/fleet.go; copy the file into the guide")
	}
	limits, err := os.ReadFile("limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), "```yaml\n"+string(limits)+"```") {
		t.Errorf("docs/guide.md does not show examples/transport/limits.yaml verbatim")
	}
}

// The example runs offline against the simulators.
func TestRunOffline(t *testing.T) {
	if err := run(false, "limits.yaml"); err != nil {
		t.Fatal(err)
	}
}
