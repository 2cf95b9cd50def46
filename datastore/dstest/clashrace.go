package dstest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// ClashRaceRoundsEnv sets the rounds of CrossPartitionClashRace (default
// 3, to keep CI inside its budget; a sweep sets more).
const ClashRaceRoundsEnv = "LAKE_CLASH_RACE_ROUNDS"

// A clashKind is one shape of a file racing files below it in another
// partition (under LayoutModels): the file above (in the partition of
// its own path) and files below it, which the layout files in another,
// often deeper, partition.
type clashKind struct {
	name  string
	above func(n int) string
	below func(n int) []string
}

// crossPartitionClashKinds are the shapes CrossPartitionClashRace races.
// A driver that does not yet refuse one of them atomically names it in
// AtomicClashKinds (below) and the race skips it, saying so.
var crossPartitionClashKinds = []clashKind{
	// The model's own directory a file (partition "data") against the
	// model's files (partition rx/N).
	{"ModelDir", func(n int) string { return fmt.Sprintf("data/rx/%d", n) },
		func(n int) []string {
			return []string{fmt.Sprintf("data/rx/%d/f", n), fmt.Sprintf("data/rx/%d/g/v/raw", n)}
		}},
	// A file at a type's directory data/T ("data") against the first
	// files of a model T/I.
	{"TypeDir", func(n int) string { return fmt.Sprintf("data/ty%d", n) },
		func(n int) []string {
			return []string{fmt.Sprintf("data/ty%d/i/f", n), fmt.Sprintf("data/ty%d/j/f", n)}
		}},
	// A short path of the model dm/N (four segments) against the
	// definition of the deeper model dm/N/o/p below it.
	{"DeeperDefinition", func(n int) string { return fmt.Sprintf("data/dm/%d/o/p", n) },
		func(n int) []string { return []string{fmt.Sprintf("data/dm/%d/o/p/model.yaml", n)} }},
	// A data file of the model dd/N (five segments) against a data file
	// of the deeper model dd/N/c below it.
	{"DeeperDataFile", func(n int) string { return fmt.Sprintf("data/dd/%d/c/d/e", n) },
		func(n int) []string {
			return []string{fmt.Sprintf("data/dd/%d/c/d/e/f", n), fmt.Sprintf("data/dd/%d/c/d/e/g", n)}
		}},
	// A short path of ds/N above the root of the deeper model ds/N/o/p.
	{"AboveDeeperModel", func(n int) string { return fmt.Sprintf("data/ds/%d/o", n) },
		func(n int) []string { return []string{fmt.Sprintf("data/ds/%d/o/p/model.yaml", n)} }},
}

// AtomicClashKinds is the optional ability of a driver whose commit does
// not refuse every cross-partition clash atomically against unfenced
// concurrent writers: it names the kinds it does (a driver without it is
// taken to refuse them all).
type AtomicClashKinds interface {
	AtomicClashKind(name string) bool
}

// testCrossPartitionClashRace: a path is a file or a directory, never
// both, when the file and the files below it fall in different partitions
// and unfenced writers race (issue 27). Each round, for every kind, one
// writer puts the file above and others put files below it, all at once;
// then no path may be both a file and a directory (Stat and List), at
// least one side must have landed, and every refusal must be the clash of
// its own path with the other side's, naming both.
func testCrossPartitionClashRace(t *testing.T, s *datastore.Store) {
	if c, ok := s.Driver().(interface{ ChecksClashes() bool }); !ok || !c.ChecksClashes() {
		t.Skipf("the %s driver does not check file/directory clashes in its commit", s.Driver().Name())
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv(ClashRaceRoundsEnv)); err == nil && v > 0 {
		rounds = v
	}
	var kinds []clashKind
	for _, k := range crossPartitionClashKinds {
		if a, ok := s.Driver().(AtomicClashKinds); ok && !a.AtomicClashKind(k.name) {
			t.Logf("the %s driver does not refuse %s clashes atomically: skipped", s.Driver().Name(), k.name)
			continue
		}
		kinds = append(kinds, k)
	}
	for r := range rounds {
		type result struct {
			path string
			err  error
		}
		var wg sync.WaitGroup
		res := make([][]result, len(kinds))
		for i, k := range kinds {
			ps := append([]string{k.above(r)}, k.below(r)...)
			res[i] = make([]result, len(ps))
			for j, p := range ps {
				wg.Go(func() {
					_, err := s.Put(t.Context(), p, strings.NewReader(p), nil)
					res[i][j] = result{p, err}
				})
			}
		}
		wg.Wait()
		for i, k := range kinds {
			above := k.above(r)
			landed := map[string]bool{}
			for _, x := range res[i] {
				switch {
				case x.err == nil:
					landed[x.path] = true
				case errors.Is(x.err, metastore.ErrUnavailable):
					// Gave up under contention: neither side's proof.
				default:
					c, ok := datastore.AsClash(x.err)
					if !ok || !errors.Is(x.err, metastore.ErrConflict) {
						t.Fatalf("round %d %s: put %s: %v, want a clash or success", r, k.name, x.path, x.err)
					}
					other := above
					if x.path == above {
						other = "" // any file below it
					}
					if c.Path != x.path || (other != "" && c.Other != other) || (other == "" && !strings.HasPrefix(c.Other, above+"/")) {
						t.Fatalf("round %d %s: put %s refused as the clash of %s with %s", r, k.name, x.path, c.Path, c.Other)
					}
					if !strings.Contains(x.err.Error(), c.Path) || !strings.Contains(x.err.Error(), c.Other) {
						t.Fatalf("round %d %s: %q does not name both paths", r, k.name, x.err)
					}
				}
			}
			// What the store holds now, by Stat and by List.
			stat, err := s.StatMany(t.Context(), append([]string{above}, k.below(r)...))
			if err != nil {
				t.Fatal(err)
			}
			fileAbove := false
			if in, ok := stat[above]; ok && !in.Deleted {
				fileAbove = true
			}
			listed, err := s.ListAll(t.Context(), above+"/")
			if err != nil {
				t.Fatal(err)
			}
			if fileAbove && len(listed) > 0 {
				t.Errorf("round %d %s: %s is a file and a directory of %s (landed: %v)", r, k.name, above, paths(listed), landed)
			}
			if !fileAbove && len(listed) == 0 && len(landed) > 0 {
				t.Fatalf("round %d %s: puts %v succeeded but the store holds none of them", r, k.name, landed)
			}
			if fileAbove != landed[above] {
				t.Fatalf("round %d %s: Stat(%s) live=%v but its put returned success=%v", r, k.name, above, fileAbove, landed[above])
			}
		}
	}
}
