package doctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
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

// recT is a testscript.T that records a failure instead of failing the
// test, so that a test can assert that a script fails.
type recT struct {
	mu     sync.Mutex
	failed bool
	log    strings.Builder
}

func (r *recT) Skip(a ...any) { runtime.Goexit() }
func (r *recT) Fatal(a ...any) {
	r.Log(a...)
	r.FailNow()
}
func (r *recT) Parallel() {}
func (r *recT) Log(a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(&r.log, a...)
}
func (r *recT) FailNow() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recT) Run(_ string, f func(testscript.T)) {
	done := make(chan struct{})
	go func() { defer close(done); f(r) }()
	<-done
}
func (r *recT) Verbose() bool { return false }

// A script whose output no longer says what the page promises fails; the
// same script with the page's promise kept passes.
func TestOutputChecksFail(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, c := range []struct {
		check string
		fail  bool
	}{
		{"<!-- stdout: ^listed data/a$ -->\n<!-- stderr: ^lake: refused -->\n", false},
		{"<!-- stdout: ^listed data/b$ -->\n", true},
		{"<!-- ! stderr: refused -->\n", true},
	} {
		page := "<!-- testscript: demo -->\n```sh\necho 'listed data/a'\necho 'lake: refused: no' >&2\n```\n" + c.check
		s, err := Scripts(Blocks("p.md", []byte(page)))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "demo.txtar"), []byte(s["demo"].Txtar()), 0o644); err != nil {
			t.Fatal(err)
		}
		r := &recT{}
		testscript.RunT(r, testscript.Params{Dir: dir, WorkdirRoot: t.TempDir()})
		if r.failed != c.fail {
			t.Errorf("checks %q: failed=%v, want %v\n%s", c.check, r.failed, c.fail, r.log.String())
		}
	}
}
