package doctest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/internal/ddblocal"
	"github.com/rogpeppe/go-internal/testscript"
)

// Pages returns the repository's markdown pages: README.md and docs/*.md,
// relative to root.
func Pages(root string) ([]string, error) {
	pages := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	sort.Strings(pages[1:])
	return pages, nil
}

// AllBlocks reads every page under root and returns its blocks.
func AllBlocks(root string) ([]Block, error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, err
	}
	var all []Block
	for _, p := range pages {
		src, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return nil, err
		}
		all = append(all, Blocks(p, src)...)
	}
	return all, nil
}

// NodePort is the port the pages' nodes listen on (`lake serve`'s default).
const NodePort = "7070"

// RunScripts runs every script of the pages under root as a testscript, one
// at a time (the pages' nodes share port 7070), in subtests named after the
// scripts. The command lake must be installed by testscript.Main in the
// test binary's TestMain. A script that needs DynamoDB Local or the S3
// server is skipped when its endpoint is unset, unless LAKE_REQUIRE_DYNAMODB
// or LAKE_REQUIRE_S3 is 1; the scripts' `eval "$(scripts/X start)"` lines
// find the running servers through LAKE_RUN_DIR (default <root>/.cache),
// and a script is skipped (or fails, as above) rather than start one.
func RunScripts(t *testing.T, root string, only string) {
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := AllBlocks(root)
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := Scripts(blocks)
	if err != nil && (only == "" || scripts[only] == nil) {
		t.Fatalf("the pages' markers:\n%s", err)
	}
	lakeBin, err := exec.LookPath("lake")
	if err != nil {
		t.Fatalf("no lake command: TestMain must install it with testscript.Main: %v", err)
	}
	runDir := os.Getenv("LAKE_RUN_DIR")
	if runDir == "" {
		runDir = filepath.Join(root, ".cache")
	}
	names := make([]string, 0, len(scripts))
	for n := range scripts {
		names = append(names, n)
	}
	sort.Strings(names)
	dir := t.TempDir()
	for _, name := range names {
		s := scripts[name]
		if only != "" && name != only {
			continue
		}
		t.Run(name, func(t *testing.T) {
			env := []string{"LAKE_RUN_DIR=" + runDir, "LAKE_STORE=", "LAKE_TOKEN=", "LAKE_TOKEN_FILE="}
			for _, need := range []struct{ name, endpoint, require, script string }{
				{"dynamodb", "AWS_ENDPOINT_URL_DYNAMODB", "LAKE_REQUIRE_DYNAMODB", "dynamodb-local"},
				{"s3", "AWS_ENDPOINT_URL_S3", "LAKE_REQUIRE_S3", "s3-local"},
			} {
				if !s.Needs[need.name] {
					continue
				}
				why := ""
				if os.Getenv(need.endpoint) == "" {
					why = need.endpoint + " is unset"
				} else if strings.Contains(scriptText(s), "scripts/"+need.script) {
					// The page evaluates the script's start: it must find
					// the running server, never start another.
					cmd := exec.Command(filepath.Join(root, "scripts", need.script), "status")
					cmd.Env = append(os.Environ(), "LAKE_RUN_DIR="+runDir)
					if out, err := cmd.CombinedOutput(); err != nil {
						why = fmt.Sprintf("scripts/%s status with LAKE_RUN_DIR=%s: %s", need.script, runDir, strings.TrimSpace(string(out)))
					}
				}
				if why != "" {
					if os.Getenv(need.require) == "1" {
						t.Fatalf("%s needs %s: %s (%s=1)", s.Page, need.name, why, need.require)
					}
					t.Skipf("%s needs %s: %s", s.Page, need.name, why)
				}
				for _, k := range []string{need.endpoint, "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
					if v, ok := os.LookupEnv(k); ok {
						env = append(env, k+"="+v)
					}
				}
			}
			if s.Needs["node"] || strings.Contains(scriptText(s), NodePort) {
				waitPortFree(t, NodePort)
			}
			if len(s.Tables) > 0 {
				deleteTables(t, s.Tables)
				t.Cleanup(func() { deleteTables(t, s.Tables) })
			}
			sdir := filepath.Join(dir, name)
			if err := os.MkdirAll(sdir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sdir, name+".txtar"), []byte(s.Txtar()), 0o644); err != nil {
				t.Fatal(err)
			}
			work := filepath.Join(sdir, "work")
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			// A process the script left behind (a node, a stuck holder)
			// would hold the script's output open, and testscript would
			// wait for it forever: the script's background jobs are
			// killed by its EXIT trap, and anything still running in its
			// directory afterwards, or after ScriptTimeout, by this.
			// (Cleanups: testscript's subtests are parallel, so they
			// run after this function returns, before its cleanups.)
			stop := time.AfterFunc(ScriptTimeout, func() { killIn(work) })
			t.Cleanup(func() { stop.Stop(); killIn(work) })
			testscript.Run(t, testscript.Params{
				Dir:         sdir,
				WorkdirRoot: work,
				Setup: func(e *testscript.Env) error {
					e.Vars = append(e.Vars, env...)
					for link, target := range map[string]string{
						"lake":     lakeBin,
						"scripts":  filepath.Join(root, "scripts"),
						"examples": filepath.Join(root, "examples"),
					} {
						if err := os.Symlink(target, filepath.Join(e.WorkDir, link)); err != nil {
							return err
						}
					}
					// The pages' *.sh files are programs the examples run.
					for path := range s.Files {
						if strings.HasSuffix(path, ".sh") {
							if err := os.Chmod(filepath.Join(e.WorkDir, path), 0o755); err != nil {
								return err
							}
						}
					}
					return nil
				},
			})
		})
	}
}

func scriptText(s *Script) string {
	var b strings.Builder
	for _, p := range s.Parts {
		b.WriteString(p.Body)
	}
	return b.String()
}

// waitPortFree waits a little for the previous script's node to let go of
// the port, and fails naming the port if something else holds it.
func waitPortFree(t *testing.T, port string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err == nil {
			l.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page's node needs 127.0.0.1:%s, which another process holds: %v", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleteTables deletes the named DynamoDB tables (absent ones are fine), so
// that a script that creates fixed table names, as the pages do, starts from
// nothing on a DynamoDB Local shared with other tests.
func deleteTables(t *testing.T, tables []string) {
	t.Helper()
	client := dynamodb.NewFromConfig(ddblocal.Config(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range tables {
		_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var nf interface{ ErrorCode() string }
		if err != nil && !(errors.As(err, &nf) && nf.ErrorCode() == "ResourceNotFoundException") {
			t.Fatalf("delete table %s: %v", name, err)
		}
	}
}

// ScriptTimeout bounds one script: the pages' examples take seconds.
const ScriptTimeout = 2 * time.Minute

// killIn kills every process whose working directory is under dir
// (Linux's /proc; elsewhere it does nothing).
func killIn(dir string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", p.Name(), "cwd"))
		if err != nil || !strings.HasPrefix(cwd, dir+string(filepath.Separator)) {
			continue
		}
		if proc, err := os.FindProcess(pid); err == nil {
			proc.Kill()
		}
	}
}
