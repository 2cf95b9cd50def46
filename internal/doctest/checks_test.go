package doctest

import (
	"strings"
	"testing"
)

// Output checks below a testscript block become testscript's stdout and
// stderr commands after the script's exec; elsewhere they are refused.
func TestOutputChecks(t *testing.T) {
	page := "<!-- testscript: demo -->\n```sh\n./lake lock ls team-a\n```\n" +
		"<!-- stdout: ^team-a/sync +held -->\n<!-- ! stderr: panic -->\n<!-- stderr: it's refused -->\n\n" +
		"Prose.\n<!-- stdout: not attached: after prose -->\n"
	s, err := Scripts(Blocks("p.md", []byte(page)))
	if err != nil {
		t.Fatal(err)
	}
	ar := s["demo"].Txtar()
	want := "exec bash -eu -o pipefail .doc/script.sh\nstdout '^team-a/sync +held'\n! stderr 'panic'\nstderr 'it''s refused'\n-- .doc/script.sh --\n"
	if !strings.Contains(ar, want) {
		t.Fatalf("txtar lacks the checks %q:\n%s", want, ar)
	}
	if strings.Contains(ar, "not attached") {
		t.Fatalf("a check after prose was attached:\n%s", ar)
	}
	_, err = Scripts(Blocks("p.md", []byte("<!-- not run: a benchmark -->\n```sh\n./lake bench x\n```\n<!-- stdout: x -->\n")))
	if err == nil || !strings.Contains(err.Error(), "no testscript") {
		t.Fatalf("checks below a block that is not run: %v", err)
	}
}
