package repocheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The docs' commands are checked in two ways (see CONTRIBUTING.md):
//
//   - every command line of every shell block (```sh, ```console, or a bare
//     fence whose lines start with "$ ") is validated without running it: a
//     `go test` names packages that exist and -run/-bench/-fuzz patterns that
//     match tests there; a command of the module (`sluice …`, `go run
//     ./cmd/sluice …`) names subcommands and flags that exist; a script or
//     directory it runs exists;
//   - a block tagged "check" (```sh check, ```console check) is also run with
//     bash from the repository root, the module's commands built on PATH; it
//     must exit 0 (or N with "exit=N"), and in a console block the lines not
//     starting with "$ " are output it must print, in order ("…" matches any
//     text).
//
// A block tagged "nocheck" is a synopsis or a sketch with placeholders and is
// left alone.

// TestDocCommands validates every documented command and runs the checked
// blocks.
func TestDocCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands and runs the documented ones: not a unit test")
	}
	root := moduleRoot(t)
	blocks := docBlocks(t, root)
	bins := buildCommands(t, root)
	v := &validator{root: root, bins: bins, help: map[string]string{}}
	var checked int
	for _, b := range blocks {
		if b.skip {
			continue
		}
		for _, c := range b.commands() {
			if err := v.validate(c); err != nil {
				t.Errorf("%s:%d: %s\n\tcommand: %s", b.file, b.line, err, c.text)
			}
		}
		if b.check {
			checked++
			t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) { runBlock(t, root, bins, b) })
		}
	}
	if checked == 0 {
		t.Error("no block is tagged check")
	}
}

// buildCommands builds the module's commands into a temporary directory
// and returns it.
func buildCommands(t *testing.T, root string) string {
	t.Helper()
	bin := t.TempDir()
	cmds, err := filepath.Glob(filepath.Join(root, "cmd", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		args := []string{"build", "-o", filepath.Join(bin, filepath.Base(c))}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./"+rel(root, c))...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", c, err, out)
		}
	}
	return bin
}

func runBlock(t *testing.T, root, bins string, b docBlock) {
	script, want := b.body, []string(nil)
	if b.lang == "console" {
		script = nil
		for _, l := range b.body {
			if cmd, ok := strings.CutPrefix(l, "$ "); ok {
				script = append(script, cmd)
			} else if strings.TrimSpace(l) != "" {
				want = append(want, strings.TrimSpace(l))
			}
		}
	}
	// `go run ./cmd/NAME` is the command just built, without compiling it again.
	text := goRunCmd.ReplaceAllString(strings.Join(script, "\n"), "$1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", text)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+bins+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running the block: %v", err)
	}
	if code != b.exit {
		t.Fatalf("exit code %d, want %d\nscript:\n%s\noutput:\n%s", code, b.exit, strings.Join(script, "\n"), out.String())
	}
	if missing := unmatched(want, strings.Split(out.String(), "\n")); missing != "" {
		t.Errorf("the output does not show %q (expected lines are matched in order, … matches any text)\noutput:\n%s", missing, out.String())
	}
}

var goRunCmd = regexp.MustCompile(`\bgo run \./cmd/([a-z-]+)`)

// unmatched returns the first expected line not found, in order, among the
// output's lines, or "" when all are.
func unmatched(want, got []string) string {
	i := 0
	for _, w := range want {
		for i < len(got) && !lineMatches(w, strings.TrimSpace(got[i])) {
			i++
		}
		if i == len(got) {
			return w
		}
		i++
	}
	return ""
}

// lineMatches reports whether line matches pattern, where "…" in pattern
// matches any text.
func lineMatches(pattern, line string) bool {
	parts := strings.Split(pattern, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(line)
}

// validator checks documented commands against the tree and the built
// commands.
type validator struct {
	root, bins string
	mu         sync.Mutex
	help       map[string]string // the --help output by command line
}

func (v *validator) validate(c docCommand) error {
	args := c.args
	dir := v.root
	for len(args) >= 3 && args[0] == "cd" && args[2] == "&&" {
		dir = filepath.Join(dir, args[1])
		args = args[3:]
	}
	if len(args) > 0 && args[0] == "time" {
		args = args[1:]
	}
	if len(args) == 0 {
		return nil
	}
	switch {
	case len(args) >= 2 && args[0] == "go" && args[1] == "test":
		return v.goTest(dir, args[2:])
	case len(args) >= 3 && args[0] == "go" && args[1] == "run":
		target := args[2]
		if !strings.HasPrefix(target, "./") {
			return nil
		}
		if _, err := os.Stat(filepath.Join(dir, target)); err != nil {
			return fmt.Errorf("go run %s: no such package", target)
		}
		if name, ok := strings.CutPrefix(target, "./cmd/"); ok && dir == v.root {
			return v.command(strings.TrimSuffix(name, "/"), args[3:])
		}
		return nil
	case strings.HasPrefix(args[0], "./"):
		fi, err := os.Stat(filepath.Join(dir, args[0]))
		if err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s: not an executable file in the repository", args[0])
		}
		return nil
	}
	name := filepath.Base(args[0])
	if _, err := os.Stat(filepath.Join(v.bins, name)); err == nil && (args[0] == name || strings.HasPrefix(args[0], "/tmp/")) {
		return v.command(name, args[1:])
	}
	return nil
}

// command checks that the module's command name accepts the subcommands and
// flags of args.
func (v *validator) command(name string, args []string) error {
	var words, flags []string
	for _, a := range args {
		if a == "|" || a == ">" || a == "2>&1" || a == "&&" || a == ";" {
			break
		}
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
		} else if len(flags) == 0 {
			words = append(words, a)
		}
	}
	help, err := v.helpOf(name, words)
	if err != nil {
		return err
	}
	path := commandPath(usageLine(help), name)
	group := strings.Join(append([]string{name}, path...), " ") + " [command]"
	if len(words) > len(path) && strings.Contains(help, group) {
		return fmt.Errorf("%s has no command %q", strings.Join(append([]string{name}, path...), " "), words[len(path)])
	}
	for _, f := range flags {
		if f == "--" || f == "-" {
			break
		}
		f, _, _ = strings.Cut(f, "=")
		if !hasFlag(help, f) {
			return fmt.Errorf("%s %s has no flag %s", name, strings.Join(path, " "), f)
		}
	}
	return nil
}

func (v *validator) helpOf(name string, words []string) (string, error) {
	key := name + " " + strings.Join(words, " ")
	v.mu.Lock()
	defer v.mu.Unlock()
	if h, ok := v.help[key]; ok {
		return h, nil
	}
	cmd := exec.Command(filepath.Join(v.bins, name), append(append([]string{}, words...), "--help")...)
	cmd.Env = append(os.Environ(), "SLUICE_STORE=memory://")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --help: %v\n%s", key, err, out)
	}
	v.help[key] = string(out)
	return string(out), nil
}

// usageLine returns the first line under "Usage:" of a cobra help text.
func usageLine(help string) string {
	_, after, ok := strings.Cut(help, "Usage:\n")
	if !ok {
		return ""
	}
	line, _, _ := strings.Cut(after, "\n")
	return strings.TrimSpace(line)
}

var commandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// commandPath returns the subcommand words of a usage line after the
// command's name, up to the first placeholder or flag.
func commandPath(usage, name string) []string {
	fields := strings.Fields(usage)
	if len(fields) == 0 || fields[0] != name {
		return nil
	}
	var path []string
	for _, f := range fields[1:] {
		if !commandWord.MatchString(f) {
			break
		}
		path = append(path, f)
	}
	return path
}

// hasFlag reports whether a help text documents flag (-x or --name).
func hasFlag(help, flag string) bool {
	re := regexp.MustCompile(`(^|[\s,])` + regexp.QuoteMeta(flag) + `([\s,=]|$)`)
	return re.MatchString(help)
}

// goTest checks a `go test` command's packages and test patterns.
func (v *validator) goTest(dir string, args []string) error {
	var pkgs []string
	patterns := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-args" || a == "|" || a == "&&" || a == ">" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case strings.HasPrefix(a, "-") && (name == "run" || name == "bench" || name == "fuzz"):
			if !hasVal && i+1 < len(args) {
				i++
				val = args[i]
			}
			patterns[name] = val
		case strings.HasPrefix(a, "-") && !hasVal && takesValue[name] && i+1 < len(args):
			i++
		case a == "." || strings.HasPrefix(a, "./"):
			pkgs = append(pkgs, a)
		}
	}
	if len(pkgs) == 0 {
		pkgs = []string{"."}
	}
	var funcs []string
	for _, p := range pkgs {
		if strings.HasSuffix(p, "/...") {
			return nil // every package: nothing to match the names against
		}
		pd := filepath.Join(dir, p)
		if fi, err := os.Stat(pd); err != nil || !fi.IsDir() {
			return fmt.Errorf("go test %s: no such package directory", p)
		}
		fs, err := testFuncs(pd)
		if err != nil {
			return err
		}
		funcs = append(funcs, fs...)
	}
	for kind, pat := range patterns {
		if err := matchPattern(kind, pat, funcs); err != nil {
			return fmt.Errorf("go test %s: %w", strings.Join(pkgs, " "), err)
		}
	}
	return nil
}

// takesValue lists the go test flags whose value may be the next argument.
var takesValue = map[string]bool{
	"count": true, "timeout": true, "benchtime": true, "fuzztime": true, "cpu": true,
	"parallel": true, "tags": true, "coverprofile": true, "cpuprofile": true, "memprofile": true,
	"o": true, "p": true, "list": true, "shuffle": true, "skip": true,
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)

// testFuncs returns the names of the test functions in dir's _test.go files.
func testFuncs(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFunc.FindAllSubmatch(data, -1) {
			names = append(names, string(m[1]))
		}
	}
	return names, nil
}

// matchPattern checks that each alternative of the first level of a -run,
// -bench or -fuzz pattern matches a function of the right kind, so that a
// renamed test shows up. "^$" and the like, which select nothing on
// purpose, pass.
func matchPattern(kind, pattern string, funcs []string) error {
	if pattern == "" || pattern == "^$" || pattern == "XXX" || pattern == "." {
		return nil
	}
	top, _, _ := strings.Cut(pattern, "/")
	prefix := map[string][]string{"run": {"Test", "Fuzz", "Example"}, "bench": {"Benchmark"}, "fuzz": {"Fuzz"}}[kind]
	for _, alt := range alternatives(top) {
		re, err := regexp.Compile(alt)
		if err != nil {
			return fmt.Errorf("-%s %q: %v", kind, pattern, err)
		}
		found := false
		for _, f := range funcs {
			for _, p := range prefix {
				if strings.HasPrefix(f, p) && re.MatchString(f) {
					found = true
				}
			}
		}
		if !found {
			return fmt.Errorf("-%s %q: %q matches no %s function", kind, pattern, alt, strings.Join(prefix, "/"))
		}
	}
	return nil
}

// alternatives splits a regular expression at its top-level "|".
func alternatives(re string) []string {
	var alts []string
	depth, start := 0, 0
	for i, r := range re {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case '|':
			if depth == 0 {
				alts = append(alts, re[start:i])
				start = i + 1
			}
		}
	}
	return append(alts, re[start:])
}
