package dstest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// KillEnv is set in the child process of RunKilledWriter.
const KillEnv = "LAKE_DSTEST_KILLED_WRITER"

// RunKilledWriter proves that a writer process killed (SIGKILL) between its
// chunks and its metadata leaves nothing visible and nothing stuck. A driver's
// test calls it from a test named testName; in the child (KillEnv set) it
// uploads a 3-chunk file through open's store, says so, and waits to be
// killed; in the parent it starts that child, kills it, and checks the store
// that open returns: no stat, listing, feed entry or partition, and the
// chunks reclaimed after the upload grace period.
func RunKilledWriter(t *testing.T, testName string, open func(t *testing.T) *datastore.Store) {
	const path = "data/killed/1/file"
	if os.Getenv(KillEnv) == "1" {
		s := open(t)
		if _, err := s.Upload(t.Context(), path, strings.NewReader(pattern(3*datastore.ChunkSize, 9)), nil); err != nil {
			fmt.Println("upload failed:", err)
			os.Exit(3)
		}
		fmt.Println("uploaded")
		time.Sleep(time.Minute)
		os.Exit(4) // never reached: the parent kills it
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+testName+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), KillEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "uploaded\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q, want uploaded", line)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	s := open(t)
	wantNotFound(t, s, path)
	if files, _ := s.ListAll(t.Context(), ""); len(files) != 0 {
		t.Fatalf("a killed writer's upload is listed: %s", paths(files))
	}
	if parts, _ := s.Partitions(t.Context()); len(parts) != 0 {
		t.Fatalf("a killed writer's upload registered %v", parts)
	}
	if ch, _ := pullAll(t, s, "killed/1", 0); len(ch) != 0 {
		t.Fatalf("a killed writer's upload is in the feed: %s", paths(ch))
	}
	s.SetClock(func() time.Time { return time.Now().Add(2 * datastore.DefaultGrace) })
	st, err := s.Reclaim(t.Context(), datastore.ReclaimOptions{})
	if err != nil || st.Uploads != 1 || st.Chunks != 3 {
		t.Fatalf("Reclaim after the killed writer = %+v, %v; want its upload and 3 chunks", st, err)
	}
	// Nothing stuck: the path takes a new version at once.
	if _, err := s.Put(t.Context(), path, strings.NewReader("after"), nil); err != nil {
		t.Fatalf("Put after the killed writer: %v", err)
	}
}
