package doctest

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// CommandTree answers whether a command path exists: Lookup returns the
// length of the longest prefix of words that names a command, and whether
// the command it names has subcommands (a group, which takes no argument
// of its own). cmd/lake implements it over its cobra tree.
type CommandTree interface {
	Lookup(words []string) (n int, group bool)
}

var (
	inlineCode = regexp.MustCompile("`([^`\n]+)`")
	// a lake invocation inside code: lake, ./lake or go run ./cmd/lake.
	lakeCall = regexp.MustCompile(`(?:^|[\s(;&|])(?:\./lake|lake|go run \./cmd/lake)((?:\s+[^\s|;&)]+)+)`)
)

// Commands returns an error naming every `lake …` command a page mentions
// (in inline code or a code block) that does not exist: a word after lake
// (and its global flags) that is no subcommand of a command group.
func Commands(page string, src []byte, tree CommandTree) []string {
	var errs []string
	check := func(line int, code string) {
		for _, m := range lakeCall.FindAllStringSubmatch(code, -1) {
			words := commandWords(m[1])
			if len(words) == 0 {
				continue
			}
			// Alternatives written a|b|c (or a\|b in a table) each name a command.
			for _, w := range expandAlternatives(words) {
				n, group := tree.Lookup(w)
				if n < len(w) && group && isCommandWord(w[n]) {
					errs = append(errs, fmt.Sprintf("%s:%d: `lake %s`: no command %q under `lake %s`", page, line, strings.Join(w, " "), w[n], strings.Join(w[:n], " ")))
				}
			}
		}
	}
	for i, line := range strings.Split(string(src), "\n") {
		for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
			check(i+1, m[1])
		}
	}
	for _, b := range Blocks(page, src) {
		if !b.Shell() {
			continue // output and files: not invocations
		}
		for j, line := range strings.Split(b.Body, "\n") {
			check(b.Line+1+j, line)
		}
	}
	return errs
}

// commandWords returns the words of an invocation that may name commands:
// global flags (--store URL, --namespace N, --flag=V) skipped, up to the
// first word that is an argument or a flag.
func commandWords(args string) []string {
	f := strings.Fields(args)
	var words []string
	for i := 0; i < len(f); i++ {
		w := strings.Trim(f[i], `"'`)
		switch {
		case w == "--store" || w == "--namespace":
			i++ // its value
			continue
		case strings.HasPrefix(w, "--store=") || strings.HasPrefix(w, "--namespace="):
			continue
		case strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") || strings.HasPrefix(w, "…"):
			return words
		}
		if !isCommandWord(strings.ReplaceAll(strings.ReplaceAll(w, `\|`, ""), "|", "")) {
			return words
		}
		words = append(words, w)
	}
	return words
}

var commandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

func isCommandWord(w string) bool { return commandWord.MatchString(w) }

func expandAlternatives(words []string) [][]string {
	out := [][]string{nil}
	for _, w := range words {
		alts := strings.Split(strings.ReplaceAll(w, `\|`, "|"), "|")
		var next [][]string
		for _, o := range out {
			for _, a := range alts {
				next = append(next, append(append([]string(nil), o...), a))
			}
		}
		out = next
	}
	return out
}

var notBuilt = regexp.MustCompile(`(?i)(does not exist yet|doesn't exist yet|not (yet )?built|not (yet )?implemented|is not available yet)`)

// NotBuilt returns an error for every paragraph (or list item) of a page
// that says a command is not built, does not exist yet or is not
// implemented, while naming a `lake …` command that exists.
func NotBuilt(page string, src []byte, tree CommandTree) []string {
	var errs []string
	lines := strings.Split(string(src), "\n")
	start := 0
	flush := func(end int) {
		para := strings.Join(lines[start:end], "\n")
		if notBuilt.MatchString(para) {
			for _, m := range inlineCode.FindAllStringSubmatch(para, -1) {
				for _, c := range lakeCall.FindAllStringSubmatch(m[1], -1) {
					words := commandWords(c[1])
					if n, _ := tree.Lookup(words); n > 0 && n == len(words) {
						errs = append(errs, fmt.Sprintf("%s:%d: says %q of `lake %s`, which exists", page, start+1, notBuilt.FindString(para), strings.Join(words, " ")))
					}
				}
			}
		}
		start = end
	}
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "#") {
			flush(i)
		}
	}
	flush(len(lines))
	return errs
}

// A figure quoted in prose: a number with a unit of the figure tables.
var proseFigure = regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?)(?:–(\d[\d,]*(?:\.\d+)?))?\s?(×|ms\b|µs\b|s\b)`)

// Words that mark a figure as not the table's: an earlier run, a target, a
// bound or a setting.
var notTheTable = regexp.MustCompile(`(?i)\b(was|were|before|earlier|gave|fell|runs|report|target|at most|up to|timeout|every|interval|budget|default|seed's|CPU|--[a-z-]+)\b`)

// Which quoted figures are checked: ratios, percentiles, and ranges.
var percentile = regexp.MustCompile(`(?i)\b(p50|p90|p99|median)\b`)

// Figures returns an error for every figure quoted in the prose that
// follows a figure block (a code block of measured output without a
// language, or a table), up to the next heading, that matches no number
// of the blocks of that section: "0.94×" beside a table whose ratio is
// 0.90, "p99 3 s" beside 1663.95 ms. A number matches when the table
// holds it at the prose's precision (1,664 ms matches 1663.95; 2 s
// matches 2009 ms). A figure in a sentence that says it is not the
// table's (an earlier run, a target, a bound, a flag) is left alone.
//
// A section that quotes another page's figures says so with
// <!-- figures: docs/PAGE.md -->; other returns that page's numbers.
//
// This is the heuristic check of sections whose figures are in no figures
// block (figures.go): it skips a lone duration (often a setting, not a
// figure). A section with a figures block is left to ExactFigures, which
// compares every figure, lone durations included.
func Figures(page string, src []byte, other func(page string) (nums, ms []float64)) []string {
	var errs []string
	sections := splitSections(string(src))
	for _, sec := range sections {
		if hasFigureBlock(sec.lines) {
			continue // checked exactly: ExactFigures
		}
		var table []float64 // every number of the section's figure blocks, in its own unit
		var tableMS []float64
		var prose []struct {
			line int
			text string
		}
		seenFigures := false
		scanLines(sec.lines, func(i int, kind lineKind) {
			l := sec.lines[i]
			switch kind {
			case outputLine, tableLine:
				nums := numbersOf(l)
				if len(nums) > 0 {
					seenFigures = true
				}
				table = append(table, nums...)
				tableMS = append(tableMS, msNumbersOf(l)...)
			case proseLine:
				if seenFigures {
					prose = append(prose, struct {
						line int
						text string
					}{sec.first + i, l})
				}
			}
		})
		for _, l := range sec.lines {
			if m := figuresFrom.FindStringSubmatch(l); m != nil && other != nil && isPageRef(m[1]) {
				n, ms := other(m[1])
				table, tableMS = append(table, n...), append(tableMS, ms...)
			}
		}
		if len(table) == 0 {
			continue
		}
		for _, p := range prose {
			for _, sentence := range splitSentences(p.text) {
				if notTheTable.MatchString(sentence) {
					continue
				}
				for _, m := range proseFigure.FindAllStringSubmatch(sentence, -1) {
					if m[3] != "×" && m[2] == "" && !percentile.MatchString(sentence) {
						continue // a lone duration: often a setting, not a figure
					}
					for _, num := range []string{m[1], m[2]} {
						if num == "" {
							continue
						}
						if !matchesTable(num, m[3], table, tableMS) {
							errs = append(errs, fmt.Sprintf("%s:%d: %q: %s%s is in no figure of its section (the prose and the table disagree; or say in the sentence where the figure comes from)", page, p.line, strings.TrimSpace(sentence), num, m[3]))
						}
					}
				}
			}
		}
	}
	return errs
}

var figuresFrom = regexp.MustCompile(`<!--\s*figures:\s*(\S+)\s*-->`)

// FigureNumbers returns the numbers of a page's figure blocks (code blocks
// without a language, tables) and their durations in seconds as ms.
func FigureNumbers(src []byte) (nums, ms []float64) {
	lines := strings.Split(string(src), "\n")
	scanLines(lines, func(i int, kind lineKind) {
		if kind == outputLine || kind == tableLine {
			nums = append(nums, numbersOf(lines[i])...)
			ms = append(ms, msNumbersOf(lines[i])...)
		}
	})
	return nums, ms
}

// lineKind is what a line of a page is to the figure checks.
type lineKind int

const (
	proseLine  lineKind = iota // outside code blocks and tables
	fenceLine                  // a code block's opening or closing fence
	codeLine                   // inside a code block with a language (commands, files)
	outputLine                 // inside a code block without a language: pasted output
	tableLine                  // a table row (outside code blocks)
)

// scanLines calls f with every line's index and kind, in order: the one
// walk of code fences and tables that every figure check shares.
func scanLines(lines []string, f func(i int, kind lineKind)) {
	inBlock, lang := false, ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		kind := proseLine
		switch {
		case strings.HasPrefix(t, "```"):
			if !inBlock {
				lang = strings.TrimSpace(strings.TrimLeft(t, "`"))
			}
			inBlock = !inBlock
			kind = fenceLine
		case inBlock && lang == "":
			kind = outputLine
		case inBlock:
			kind = codeLine
		case strings.HasPrefix(t, "|"):
			kind = tableLine
		}
		f(i, kind)
	}
}

type section struct {
	first int // 1-based line of the section's first line
	lines []string
}

func splitSections(src string) []section {
	var out []section
	cur := section{first: 1}
	inBlock := false
	for i, l := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
		}
		if !inBlock && strings.HasPrefix(l, "#") {
			out = append(out, cur)
			cur = section{first: i + 1}
		}
		cur.lines = append(cur.lines, l)
	}
	return append(out, cur)
}

func splitSentences(s string) []string {
	return regexp.MustCompile(`[.;]\s`).Split(s, -1)
}

var number = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)

func numbersOf(line string) []float64 {
	var out []float64
	for _, n := range number.FindAllString(line, -1) {
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n, ",", ""), 64); err == nil {
			out = append(out, f)
		}
	}
	return out
}

var secondsValue = regexp.MustCompile(`(\d+(?:\.\d+)?)s\b`)

// msNumbersOf returns a line's durations written in seconds (1.5s, as Go
// prints them), in milliseconds.
func msNumbersOf(line string) []float64 {
	var out []float64
	for _, m := range secondsValue.FindAllStringSubmatch(line, -1) {
		if f, err := strconv.ParseFloat(m[1], 64); err == nil {
			out = append(out, f*1000)
		}
	}
	return out
}

// matchesTable reports whether a prose figure (num in unit) is one of the
// table's numbers at the prose's precision; seconds are also compared with
// the table's milliseconds.
func matchesTable(num, unit string, table, tableMS []float64) bool {
	v, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
	if err != nil {
		return true
	}
	decimals := 0
	if i := strings.IndexByte(num, '.'); i >= 0 {
		decimals = len(num) - i - 1
	}
	round := func(x float64) float64 {
		p := math.Pow(10, float64(decimals))
		return math.Round(x*p) / p
	}
	for _, t := range table {
		if round(t) == v {
			return true
		}
	}
	if unit == "s" {
		for _, t := range append(append([]float64(nil), table...), tableMS...) {
			if round(t/1000) == v {
				return true
			}
		}
	}
	return false
}

var perPhrase = regexp.MustCompile(`(?i)\bup to (\d[\d,]*) ([a-z]+) per ([a-z]+)`)

// Limits returns an error when a page states one limit twice with two
// values: "up to 50 keys per transaction" and "up to 25 keys per
// transaction".
func Limits(page string, src []byte) []string {
	type at struct {
		n    string
		line int
	}
	seen := map[string]at{}
	var errs []string
	for i, l := range strings.Split(string(src), "\n") {
		for _, m := range perPhrase.FindAllStringSubmatch(l, -1) {
			k := strings.ToLower(m[2] + " per " + m[3])
			if prev, ok := seen[k]; ok && prev.n != m[1] {
				errs = append(errs, fmt.Sprintf("%s:%d: up to %s %s, but line %d says up to %s", page, i+1, m[1], k, prev.line, prev.n))
				continue
			}
			seen[k] = at{m[1], i + 1}
		}
	}
	return errs
}

var (
	bareLake  = regexp.MustCompile(`(^|&&|;|\|)\s*lake\s`)
	isoDate   = regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
	measuring = regexp.MustCompile("(lake|\\./lake|go run \\./cmd/lake)[^`\\n]*\\bbench\\b|go test [^`\\n]*-(bench|run)\\b|\\bbench[ -][a-z]")
	unsourced = regexp.MustCompile(`<!--\s*unsourced:\s*\S[^>]*-->`)
	cell      = regexp.MustCompile(`^\s*[~≈]?[\d,.]+\s*(×|%|ms|µs|s|MiB|KiB|GET|PUT|LIST)?\s*$`)
)

// BareLake returns an error for every shell line that runs `lake` without
// a path: the README builds ./lake, which is not on PATH.
func BareLake(page string, src []byte) []string {
	var errs []string
	for _, b := range Blocks(page, src) {
		if !b.Shell() {
			continue
		}
		for j, line := range strings.Split(b.Body, "\n") {
			if bareLake.MatchString(line) {
				errs = append(errs, fmt.Sprintf("%s:%d: %q runs lake from PATH; the README builds ./lake", page, b.Line+1+j, strings.TrimSpace(line)))
			}
		}
	}
	return errs
}

// Sources returns an error for every section that holds measured figures
// (a table whose cells are mostly numbers, or an output block of numbers)
// but names no measuring command (`lake bench …`, `go test -bench …`) or
// no date (YYYY-MM-DD): every figure is the output of a named command,
// with its flags and date. A section whose figures cannot name one says
// why in <!-- unsourced: REASON --> (and its prose).
func Sources(page string, src []byte) []string {
	var errs []string
	for _, sec := range splitSections(string(src)) {
		text := strings.Join(sec.lines, "\n")
		figures, at := false, 0
		scanLines(sec.lines, func(i int, kind lineKind) {
			t := strings.TrimSpace(sec.lines[i])
			var cells []string
			switch {
			case figures:
				return
			case kind == outputLine:
				cells = strings.Fields(t)
			case kind == tableLine && !strings.HasPrefix(t, "|---") && !strings.HasPrefix(t, "| ---"):
				cells = strings.Split(strings.Trim(t, "|"), "|")
			}
			num, measured := 0, false
			for _, c := range cells {
				if cell.MatchString(c) {
					num++
					// Counts alone (status codes, asserted request
					// counts) are not measurements; a fraction or a unit is.
					measured = measured || strings.ContainsAny(c, ".×%µ") || strings.Contains(c, "ms")
				}
			}
			if len(cells) >= 3 && num*2 >= len(cells) && measured {
				figures, at = true, sec.first+i
			}
		})
		if !figures {
			continue
		}
		if unsourced.MatchString(text) {
			continue // the section says why its figures name no command
		}
		if !measuring.MatchString(text) || !isoDate.MatchString(text) {
			errs = append(errs, fmt.Sprintf("%s:%d: measured figures in a section that names no measuring command (`lake bench …`, `go test -bench …`) and date (YYYY-MM-DD)", page, at))
		}
	}
	return errs
}
