// Package doctest keeps lake's markdown pages (the README and docs/) from
// drifting from the code: it extracts the command blocks a page marks as
// runnable and assembles them into testscripts (github.com/rogpeppe/go-internal/testscript)
// that `go test` runs with the lake binary, and it checks the pages' prose:
// every `lake …` command a page names exists, no page calls an existing
// command "not built", and the figures quoted in prose are those of the
// page's own measured tables.
//
// A page marks each fenced ```sh block with an HTML comment on the line
// directly above it (invisible when rendered):
//
//	<!-- testscript: NAME [needs=node,dynamodb,s3] [tables=T1,T2] -->
//	    the block is (part of) the script NAME: its lines run in order, under
//	    `bash -eu -o pipefail`, in a fresh directory where ./lake is the
//	    binary under test and scripts/ and examples/ are the repository's.
//	    Blocks of one name run as one script, in page order. needs=node:
//	    the page runs `./lake serve` in another shell first, so the harness
//	    starts it in the background (port 7070, waiting for /readyz);
//	    needs=dynamodb, needs=s3: the test servers' environment is passed on
//	    (the script is skipped without them); tables: DynamoDB tables the
//	    script creates under fixed names, deleted before and after it.
//	<!-- testscript-file: NAME PATH -->
//	    the block (any language) is the file PATH of the script NAME, shown on
//	    the page because the example needs it (a *.sh file is made executable).
//	<!-- stdout: REGEXP -->, <!-- stderr: REGEXP -->, <!-- ! stdout: REGEXP -->
//	    on the lines directly below a testscript block (one check a line):
//	    what the script's output must (or, with !, must not) match, as
//	    testscript's stdout and stderr commands (multi-line mode: ^ and $ are
//	    a line's ends) over the whole script's output. They check what the
//	    example promises the reader (a listed file, a count, an error
//	    message), never a timing.
//	<!-- not run: REASON -->
//	    the block is not run by the tests; REASON says why (a long benchmark,
//	    AWS itself); the page says so in its prose too.
//
// A ```sh block without a marker fails TestDocs: a new example is a test or
// says why it is not.
//
// Measured figures sit in figures blocks that name their command
// (<!-- figures: COMMAND --> … <!-- /figures -->, see figures.go), checked
// exactly by ExactFigures and rewritten by internal/doctest/cmd/refigure.
package doctest

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Block is a fenced code block of a markdown page.
type Block struct {
	Page   string   // the page's path, relative to the repository root
	Line   int      // 1-based line of the opening fence
	Lang   string   // the fence's info string ("sh", "" …)
	Body   string   // the lines between the fences, each ending in "\n"
	Marker string   // the content of the HTML comment on the line directly above, trimmed; "" if none
	Checks []string // the output checks below the block, as testscript commands (stdout 're')
}

// Where names the block as PAGE:LINE.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.Page, b.Line) }

var (
	commentLine = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)
	checkLine   = regexp.MustCompile(`^\s*<!--\s*(!\s*)?(stdout|stderr):\s?(.*?)\s*-->\s*$`)
)

// checkCommand returns the testscript command of an output check line.
func checkCommand(m []string) string {
	neg := ""
	if m[1] != "" {
		neg = "! "
	}
	return neg + m[2] + " '" + strings.ReplaceAll(m[3], "'", "''") + "'"
}

// Blocks returns the fenced code blocks of a markdown page, in order.
func Blocks(page string, src []byte) []Block {
	var (
		out    []Block
		cur    *Block
		fence  string
		prev   string
		lineNo int
		checks bool // the lines since the last block closed are all output checks
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if cur != nil {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(trimmed[len(fence):]) == "" {
				out = append(out, *cur)
				cur, checks = nil, true
			} else {
				cur.Body += line + "\n"
			}
			prev = line
			continue
		}
		if m := checkLine.FindStringSubmatch(line); m != nil && checks {
			last := &out[len(out)-1]
			last.Checks = append(last.Checks, checkCommand(m))
			prev = line
			continue
		}
		checks = false
		if strings.HasPrefix(trimmed, "```") {
			n := len(trimmed) - len(strings.TrimLeft(trimmed, "`"))
			fence = strings.Repeat("`", n)
			cur = &Block{Page: page, Line: lineNo, Lang: strings.TrimSpace(trimmed[n:])}
			if m := commentLine.FindStringSubmatch(prev); m != nil {
				cur.Marker = m[1]
			}
		}
		prev = line
	}
	return out
}

// Shell reports whether the block is a shell block: the blocks a user
// pastes into a terminal, each of which must carry a marker.
func (b Block) Shell() bool {
	switch b.Lang {
	case "sh", "bash", "shell", "console":
		return true
	}
	return false
}

// Script is one testscript assembled from a page's marked blocks.
type Script struct {
	Name   string
	Page   string
	Needs  map[string]bool // "node", "dynamodb", "s3"
	Tables []string        // DynamoDB tables the script creates: deleted before and after it
	Parts  []Block         // the ```sh blocks, in page order
	Files  map[string]Block
	Checks []string // the parts' output checks, as testscript commands
}

// Scripts assembles the scripts of the given blocks (of any number of
// pages). It returns an error for a malformed marker, a ```sh block
// without a marker, a file of no script, or a script of two pages.
func Scripts(blocks []Block) (map[string]*Script, error) {
	scripts := map[string]*Script{}
	var errs []string
	get := func(b Block, name string) *Script {
		s := scripts[name]
		if s == nil {
			s = &Script{Name: name, Page: b.Page, Needs: map[string]bool{}, Files: map[string]Block{}}
			scripts[name] = s
		}
		if s.Page != b.Page {
			errs = append(errs, fmt.Sprintf("%s: script %q already belongs to %s", b.Where(), name, s.Page))
		}
		return s
	}
	for _, b := range blocks {
		kind, rest, _ := strings.Cut(b.Marker, ":")
		kind, rest = strings.TrimSpace(kind), strings.TrimSpace(rest)
		if len(b.Checks) > 0 && kind != "testscript" {
			errs = append(errs, fmt.Sprintf("%s: output checks (<!-- stdout: … -->) below a block that is no testscript", b.Where()))
		}
		switch kind {
		case "testscript":
			f := strings.Fields(rest)
			if len(f) == 0 || !b.Shell() {
				errs = append(errs, fmt.Sprintf("%s: a testscript marker needs a name and a ```sh block", b.Where()))
				continue
			}
			s := get(b, f[0])
			for _, opt := range f[1:] {
				k, v, ok := strings.Cut(opt, "=")
				switch {
				case ok && k == "needs":
					for _, n := range strings.Split(v, ",") {
						if n != "node" && n != "dynamodb" && n != "s3" {
							errs = append(errs, fmt.Sprintf("%s: unknown need %q (node, dynamodb, s3)", b.Where(), n))
						}
						s.Needs[n] = true
					}
				case ok && k == "tables":
					s.Tables = append(s.Tables, strings.Split(v, ",")...)
				default:
					errs = append(errs, fmt.Sprintf("%s: unknown testscript option %q", b.Where(), opt))
				}
			}
			s.Parts = append(s.Parts, b)
			s.Checks = append(s.Checks, b.Checks...)
		case "testscript-file":
			f := strings.Fields(rest)
			if len(f) != 2 {
				errs = append(errs, fmt.Sprintf("%s: want <!-- testscript-file: NAME PATH -->", b.Where()))
				continue
			}
			s := get(b, f[0])
			if _, dup := s.Files[f[1]]; dup {
				errs = append(errs, fmt.Sprintf("%s: file %s given twice", b.Where(), f[1]))
			}
			s.Files[f[1]] = b
		case "not run":
			if rest == "" {
				errs = append(errs, fmt.Sprintf("%s: say why the block is not run: <!-- not run: REASON -->", b.Where()))
			}
		default:
			if b.Shell() {
				errs = append(errs, fmt.Sprintf("%s: a ```%s block without a marker: mark it <!-- testscript: NAME --> (and show the files it needs) or <!-- not run: REASON --> (see internal/doctest)", b.Where(), b.Lang))
			}
		}
	}
	for name, s := range scripts {
		if len(s.Parts) == 0 {
			errs = append(errs, fmt.Sprintf("%s: files of script %q, which has no ```sh block", s.Page, name))
		}
	}
	if len(errs) > 0 {
		return scripts, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return scripts, nil
}

// Txtar returns the script as a testscript archive: one exec of bash on
// the page's blocks, verbatim, and the files the page shows.
func (s *Script) Txtar() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: generated from %s by internal/doctest; edit the page, not this.\n", s.Name, s.Page)
	b.WriteString("exec bash -eu -o pipefail .doc/script.sh\n")
	for _, c := range s.Checks {
		b.WriteString(c + "\n")
	}
	b.WriteString("-- .doc/script.sh --\n")
	// The background jobs end with the script, the last started first, so
	// that a client (a stuck `lake lock run`) still finds the node started
	// before it (`./lake serve &`) to release its lock through.
	// (jobs runs in this shell: in a pipeline it would list nothing.)
	// set +e: a killed job's status must not end the trap early.
	b.WriteString("trap 'set +e; pids=$(jobs -p); for j in $(printf \"%s\\n\" $pids | tac); do kill $j 2>/dev/null; wait $j 2>/dev/null; done; true' EXIT\n")
	if s.Needs["node"] {
		// The node the page starts in another shell (`./lake serve`, in
		// the foreground there): here in the background, until it answers.
		b.WriteString("# needs=node: the page's node, run in another shell there\n")
		b.WriteString("./lake serve >.doc/node.log 2>&1 &\n")
		b.WriteString("for i in $(seq 100); do curl -sf http://127.0.0.1:" + NodePort + "/readyz >/dev/null && break; sleep 0.1; done\n")
	}
	for _, p := range s.Parts {
		fmt.Fprintf(&b, "# %s\n", p.Where())
		b.WriteString(p.Body)
	}
	paths := make([]string, 0, len(s.Files))
	for path := range s.Files {
		paths = append(paths, path)
	}
	sort.Strings(paths)
	for _, path := range paths {
		fmt.Fprintf(&b, "-- %s --\n%s", path, s.Files[path].Body)
	}
	return b.String()
}
