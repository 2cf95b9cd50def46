package doctest

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// A page's measured figures sit between two markers that name the command
// producing them, so that they are checked exactly and refreshed by one
// command (internal/doctest/cmd/refigure):
//
//	<!-- figures: COMMAND -->
//	Measured YYYY-MM-DD with `COMMAND`:
//
//	```
//	the command's standard output, verbatim
//	```
//	<!-- /figures -->
//
// COMMAND runs under `bash -eu -o pipefail` in the repository's root, with
// ./lake built from it and the environment of the shell that runs refigure
// (the test servers' endpoints). Output that is a markdown table (every
// line starts with |) is pasted as the table, without the fence. Everything
// between the markers is the command's: refigure rewrites it whole, so a
// page's words about the run (its size, the machine) go above the marker.
//
// In a section (up to the next heading) that holds such a block, every
// figure its prose quotes (a number with ×, ms, µs, s, %, items/s; ranges
// and lone durations included) must be a number of the section's blocks at
// the prose's precision; a sentence that quotes a figure of another kind
// says so in words the heuristic check knows (an earlier run, a default, a
// target, a bound: see notTheTable).

// FigureBlock is a page's block of figures produced by a named command.
type FigureBlock struct {
	Page    string
	Line    int    // 1-based line of the opening marker
	End     int    // 1-based line of the closing marker
	Command string // the command the marker names
	Body    []string
}

var (
	figuresOpen  = regexp.MustCompile(`^\s*<!--\s*figures:\s*(.*?)\s*-->\s*$`)
	figuresClose = regexp.MustCompile(`^\s*<!--\s*/figures\s*-->\s*$`)
	// The header refigure writes; its command must be the marker's.
	figuresHeader = regexp.MustCompile("^Measured (20\\d\\d-\\d\\d-\\d\\d) with `(.+)`:$")
)

// isPageRef reports whether a figures marker names another page (the form
// <!-- figures: docs/PAGE.md --> that Figures reads) rather than a command.
func isPageRef(arg string) bool {
	return !strings.ContainsAny(arg, " \t") && strings.HasSuffix(arg, ".md")
}

// FigureBlocks returns a page's blocks of figures and an error for every
// malformed one: a marker left open, a closing marker without an opening
// one, no command, a body that is not the header and one table or output
// block (see the shape above), or a header naming another command.
func FigureBlocks(page string, src []byte) ([]FigureBlock, []string) {
	var (
		out  []FigureBlock
		errs []string
		cur  *FigureBlock
	)
	lines := strings.Split(string(src), "\n")
	inFence := false // a code block outside figures blocks: a marker there is an example, not a block
	for i, l := range lines {
		if cur == nil && strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
		}
		if inFence {
			continue
		}
		if m := figuresOpen.FindStringSubmatch(l); m != nil && !isPageRef(m[1]) {
			if cur != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: a figures block opened inside the one of line %d (close it with <!-- /figures -->)", page, i+1, cur.Line))
			}
			cur = &FigureBlock{Page: page, Line: i + 1, Command: m[1]}
			if m[1] == "" {
				errs = append(errs, fmt.Sprintf("%s:%d: a figures marker names no command: <!-- figures: COMMAND -->", page, i+1))
			}
			continue
		}
		if figuresClose.MatchString(l) {
			if cur == nil {
				errs = append(errs, fmt.Sprintf("%s:%d: <!-- /figures --> closes no figures block", page, i+1))
				continue
			}
			cur.End = i + 1
			errs = append(errs, cur.shapeErrors()...)
			out = append(out, *cur)
			cur = nil
			continue
		}
		if cur != nil {
			cur.Body = append(cur.Body, l)
		}
	}
	if cur != nil {
		errs = append(errs, fmt.Sprintf("%s:%d: a figures block never closed (<!-- /figures -->)", page, cur.Line))
	}
	return out, errs
}

// shapeErrors checks a block's body: the header, a blank line, then one
// table whose rows all have its header's cells, or one output block.
func (f FigureBlock) shapeErrors() []string {
	at := func(format string, a ...any) []string {
		return []string{fmt.Sprintf("%s:%d: figures of `%s`: %s (refigure writes the block: go run ./internal/doctest/cmd/refigure)", f.Page, f.Line, f.Command, fmt.Sprintf(format, a...))}
	}
	body := f.Body
	for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
		body = body[:len(body)-1]
	}
	if len(body) < 3 {
		return at("no header and figures")
	}
	m := figuresHeader.FindStringSubmatch(body[0])
	if m == nil {
		return at("the first line is not \"Measured YYYY-MM-DD with `COMMAND`:\"")
	}
	if _, err := time.Parse(time.DateOnly, m[1]); err != nil {
		return at("the header's date %s: %v", m[1], err)
	}
	if m[2] != f.Command {
		return at("the header names `%s`, the marker `%s`", m[2], f.Command)
	}
	if strings.TrimSpace(body[1]) != "" {
		return at("no blank line after the header")
	}
	rest := body[2:]
	if strings.HasPrefix(rest[0], "|") {
		width := len(tableCells(rest[0]))
		if len(rest) < 3 || !isSeparator(rest[1]) {
			return at("a table without a separator row and a row of figures")
		}
		for j, r := range rest[1:] {
			if !strings.HasPrefix(r, "|") {
				return at("line %d of the table is not a row: one table, nothing after it", j+2)
			}
			if n := len(tableCells(r)); n != width {
				return at("row %d of the table has %d cells, its header %d", j+1, n, width)
			}
		}
		return nil
	}
	if rest[0] != "```" || rest[len(rest)-1] != "```" || len(rest) < 3 {
		return at("the figures are neither a table nor one output block (``` without a language)")
	}
	for _, l := range rest[1 : len(rest)-1] {
		if strings.HasPrefix(l, "```") {
			return at("more than one output block")
		}
	}
	return nil
}

func tableCells(row string) []string {
	t := strings.TrimSpace(row)
	t = strings.TrimSuffix(strings.TrimPrefix(t, "|"), "|")
	return strings.Split(strings.ReplaceAll(t, `\|`, "\x00"), "|")
}

func isSeparator(row string) bool {
	for _, c := range tableCells(row) {
		if strings.Trim(strings.TrimSpace(c), ":-") != "" || !strings.Contains(c, "-") {
			return false
		}
	}
	return true
}

// RenderFigures returns the body refigure writes for a command's output
// measured on date: the header, then the output as a table or in an
// output block.
func RenderFigures(command string, date time.Time, output string) []string {
	var lines []string
	for _, l := range strings.Split(output, "\n") {
		lines = append(lines, strings.TrimRight(l, " \t\r"))
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	body := []string{fmt.Sprintf("Measured %s with `%s`:", date.Format(time.DateOnly), command), ""}
	table := len(lines) > 0
	for _, l := range lines {
		table = table && strings.HasPrefix(l, "|")
	}
	if table {
		return append(body, lines...)
	}
	body = append(body, "```")
	for _, l := range lines {
		if strings.HasPrefix(l, "```") {
			l = " " + l // never closes the block early
		}
		body = append(body, l)
	}
	return append(body, "```")
}

// ReplaceFigures returns the page with each block's body replaced by
// bodies[i] (nil keeps it). blocks are the page's, from FigureBlocks.
func ReplaceFigures(src []byte, blocks []FigureBlock, bodies [][]string) []byte {
	lines := strings.Split(string(src), "\n")
	var out []string
	next := 0
	for i, b := range blocks {
		out = append(out, lines[next:b.Line]...) // up to and with the opening marker
		if bodies[i] != nil {
			out = append(out, bodies[i]...)
		} else {
			out = append(out, lines[b.Line:b.End-1]...)
		}
		next = b.End - 1 // the closing marker
	}
	out = append(out, lines[next:]...)
	return []byte(strings.Join(out, "\n"))
}

// exactFigure is a figure quoted in the prose of a section with figure
// blocks: every unit of proseFigure, and percentages and rates too.
var exactFigure = regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?)(?:–(\d[\d,]*(?:\.\d+)?))?\s?(×|ms\b|µs\b|s\b|%|items/s\b)`)

// sentenceEnd ends a sentence (or a clause: the checks read clauses).
var sentenceEnd = regexp.MustCompile(`[.;]\s`)

// goDuration is a duration as Go prints it (1m37.355s, 820µs, 2.801s).
var goDuration = regexp.MustCompile(`\b(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?(?:ms|µs|s)\b|\b\d+h\d+m\b|\b\d+m\b`)

// ExactFigures returns an error for every figure quoted in the prose of a
// section that holds figure blocks and is no number of those blocks (at
// the prose's precision; a duration in seconds also matches the blocks'
// durations). Lone durations are compared too: the prose of such a section
// quotes its blocks, and a sentence that quotes anything else says so
// (notTheTable).
func ExactFigures(page string, src []byte) []string {
	blocks, _ := FigureBlocks(page, src)
	if len(blocks) == 0 {
		return nil
	}
	var errs []string
	inBlock := func(line int) bool {
		for _, b := range blocks {
			if line >= b.Line && line <= b.End {
				return true
			}
		}
		return false
	}
	for _, sec := range splitSections(string(src)) {
		var nums, ms []float64
		for _, b := range blocks {
			if b.Line < sec.first || b.Line >= sec.first+len(sec.lines) {
				continue
			}
			for _, l := range b.Body {
				if figuresHeader.MatchString(l) {
					continue // its command's flags are not figures
				}
				nums = append(nums, numbersOf(l)...)
				for _, d := range goDuration.FindAllString(l, -1) {
					if v, err := time.ParseDuration(d); err == nil {
						ms = append(ms, float64(v)/float64(time.Millisecond))
					}
				}
			}
		}
		if nums == nil {
			continue
		}
		// Sentences run across lines: the prose is read a paragraph at a
		// time, so that a sentence's words (an earlier run) cover its
		// figures on every line.
		var para []string
		first := 0
		flush := func() {
			text := strings.Join(para, "\n")
			at := 0
			for _, sentence := range sentenceEnd.Split(text, -1) {
				line := first + strings.Count(text[:at], "\n")
				at += len(sentence)
				if loc := sentenceEnd.FindStringIndex(text[at:]); loc != nil {
					at += loc[1]
				}
				if notTheTable.MatchString(sentence) {
					continue
				}
				for _, m := range exactFigure.FindAllStringSubmatch(inlineCode.ReplaceAllString(sentence, ""), -1) {
					for _, num := range []string{m[1], m[2]} {
						if num != "" && !matchesExact(num, m[3], nums, ms) {
							errs = append(errs, fmt.Sprintf("%s:%d: %q: %s%s is in no figures block of its section (re-measure with the block's command, or say in the sentence where the figure comes from)", page, line, strings.Join(strings.Fields(sentence), " "), num, m[3]))
						}
					}
				}
			}
			para = nil
		}
		scanLines(sec.lines, func(i int, kind lineKind) {
			line := sec.first + i
			if kind != proseLine || inBlock(line) || strings.TrimSpace(sec.lines[i]) == "" {
				flush()
				return
			}
			if para == nil {
				first = line
			}
			para = append(para, sec.lines[i])
		})
		flush()
	}
	return errs
}

// matchesExact is matchesTable with the blocks' durations: a figure in ms,
// µs or s also matches a Go duration of the blocks at the prose's precision.
func matchesExact(num, unit string, nums, ms []float64) bool {
	scale := map[string]float64{"ms": 1, "µs": 0.001, "s": 1000}[unit]
	if scale == 0 {
		return matchesTable(num, unit, nums, nil)
	}
	scaled := make([]float64, len(ms))
	for i, v := range ms {
		scaled[i] = v / scale
	}
	return matchesTable(num, "", append(append([]float64(nil), nums...), scaled...), nil)
}

// hasFigureBlock reports whether a section (its lines) holds a figures
// block: the heuristic Figures check leaves such a section to ExactFigures.
func hasFigureBlock(lines []string) bool {
	blocks, _ := FigureBlocks("", []byte(strings.Join(lines, "\n")))
	return len(blocks) > 0
}
