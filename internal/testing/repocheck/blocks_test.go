package repocheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docBlock is one fenced block of a Markdown file that may hold commands.
type docBlock struct {
	file  string
	line  int
	lang  string // sh, bash, shell, console, or "" for a bare fence
	check bool
	skip  bool
	exit  int
	body  []string
}

// docCommand is one command line of a block, continuation lines joined.
type docCommand struct {
	text string
	args []string
}

var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "": true}

func docBlocks(t *testing.T, root string) []docBlock {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, rel(root, path))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, parseBlocks(f, string(data))...)
	}
	return blocks
}

// parseBlocks returns the blocks of a Markdown text that may hold commands.
func parseBlocks(file, md string) []docBlock {
	var blocks []docBlock
	var cur *docBlock
	inOther := false
	sc := bufio.NewScanner(strings.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		switch {
		case cur != nil && fence:
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.body = append(cur.body, line)
		case inOther && fence:
			inOther = false
		case fence:
			words := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "```"))
			lang := ""
			if len(words) > 0 {
				lang, words = words[0], words[1:]
			}
			if !shellLangs[lang] {
				inOther = true
				continue
			}
			b := docBlock{file: file, line: n, lang: lang}
			for _, w := range words {
				switch {
				case w == "check":
					b.check = true
				case w == "nocheck":
					b.skip = true
				case strings.HasPrefix(w, "exit="):
					b.exit, _ = strconv.Atoi(strings.TrimPrefix(w, "exit="))
				}
			}
			cur = &b
		}
	}
	return blocks
}

var (
	trailingComment = regexp.MustCompile(`\s+#\s.*$`)
	assignment      = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)
	variable        = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)
)

// commands returns the command lines of b: in a console block or a bare
// fence the lines that start with "$ " (a bare fence's lines starting with
// "go test", "go run" or "sluice" count too); in a shell block every line
// that is not a comment. Variables assigned earlier in the block are
// substituted.
func (b docBlock) commands() []docCommand {
	var lines []string
	for i := 0; i < len(b.body); i++ {
		line := b.body[i]
		if b.lang == "console" || b.lang == "" {
			cmd, ok := strings.CutPrefix(line, "$ ")
			if !ok && b.lang == "" && (strings.HasPrefix(line, "go test ") || strings.HasPrefix(line, "go run ") || strings.HasPrefix(line, "sluice ")) {
				cmd, ok = line, true
			}
			if !ok {
				continue
			}
			line = cmd
		}
		for strings.HasSuffix(strings.TrimRight(line, " "), `\`) && i+1 < len(b.body) {
			i++
			line = strings.TrimSuffix(strings.TrimRight(line, " "), `\`) + " " + strings.TrimSpace(b.body[i])
		}
		line = strings.TrimSpace(trailingComment.ReplaceAllString(line, ""))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lines = append(lines, line)
	}
	vars := map[string]string{}
	var cmds []docCommand
	for _, line := range lines {
		line = variable.ReplaceAllStringFunc(line, func(m string) string {
			name := variable.FindStringSubmatch(m)[1]
			if v, ok := vars[name]; ok {
				return v
			}
			return m
		})
		if m := assignment.FindStringSubmatch(line); m != nil && (!strings.Contains(m[2], " ") || strings.HasPrefix(m[2], `"`) || strings.HasPrefix(m[2], "'")) {
			if v := split(m[2]); len(v) > 0 {
				vars[m[1]] = strings.Join(v, " ")
			}
			continue
		}
		args := split(strings.Trim(line, "()"))
		for len(args) > 0 && assignment.MatchString(args[0]) {
			args = args[1:] // VAR=value command …
		}
		cmds = append(cmds, docCommand{text: line, args: args})
	}
	return cmds
}

// split splits a command line into words as a shell would, with single and
// double quotes (no expansions).
func split(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// TestParseDocBlocks pins how fences, tags, commands and expected output
// are read.
func TestParseDocBlocks(t *testing.T) {
	md := "text\n```sh check\necho hi\n```\n```go\nx := 1\n```\n```console check exit=2\n$ false\nout …\n```\n" +
		"```sh nocheck\nslow\n```\n```\n$ sluice a \\\n   --b c   # note\noutput\ngo test -run 'X|Y' ./p\n```\n" +
		"```sh\nR=\"--store redis://h --workers 8\"\nSLUICE_LONG=1 sluice bench $R --x\n(cd bench && go test ./redis)\n```\n"
	got := parseBlocks("f.md", md)
	if len(got) != 5 {
		t.Fatalf("got %d blocks, want 5: %+v", len(got), got)
	}
	if b := got[0]; !b.check || b.line != 2 || strings.Join(b.body, "|") != "echo hi" {
		t.Errorf("block 0 = %+v", b)
	}
	if b := got[1]; !b.check || b.exit != 2 || b.lang != "console" || len(b.body) != 2 {
		t.Errorf("block 1 = %+v", b)
	}
	if b := got[2]; !b.skip || b.check {
		t.Errorf("block 2 = %+v", b)
	}
	var cmds []string
	for _, b := range got[3:] {
		for _, c := range b.commands() {
			cmds = append(cmds, strings.Join(c.args, "|"))
		}
	}
	want := []string{
		"sluice|a|--b|c",
		"go|test|-run|X|Y|./p",
		"sluice|bench|--store|redis://h|--workers|8|--x",
		"cd|bench|&&|go|test|./redis",
	}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
	}
	for _, tc := range []struct {
		pattern, line string
		want          bool
	}{
		{"granted …", "granted lease 1234 (ttl 60s)", true},
		{"granted …", "denied", false},
		{"a … b", "a x y b", true},
		{"exact", "exact", true},
		{"exact", "exact too", false},
	} {
		if got := lineMatches(tc.pattern, tc.line); got != tc.want {
			t.Errorf("lineMatches(%q, %q) = %v, want %v", tc.pattern, tc.line, got, tc.want)
		}
	}
}

// TestMatchPattern pins which test patterns pass.
func TestMatchPattern(t *testing.T) {
	funcs := []string{"TestConformance", "TestSkew", "BenchmarkAcquire", "FuzzParse"}
	for _, tc := range []struct {
		kind, pattern string
		ok            bool
	}{
		{"run", "TestConformance/Model", true},
		{"run", "TestSkew|TestConformance", true},
		{"run", "TestSkew|TestGone", false},
		{"run", "^TestSkew$", true},
		{"run", "^$", true},
		{"bench", "BenchmarkAcquire", true},
		{"bench", "BenchmarkRelease", false},
		{"fuzz", "^FuzzParse$", true},
		{"run", "TestBenchmarkAcquire", false},
	} {
		if err := matchPattern(tc.kind, tc.pattern, funcs); (err == nil) != tc.ok {
			t.Errorf("matchPattern(%s, %q) = %v, want ok=%v", tc.kind, tc.pattern, err, tc.ok)
		}
	}
}
