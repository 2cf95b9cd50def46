// Package dstest is the conformance suite of the datastore contract. Every
// driver runs it with one call from its own tests:
//
//	func TestConformance(t *testing.T) {
//		dstest.RunConformanceTests(t, func(t *testing.T) *datastore.Store { return newStore(t) })
//	}
//
// Each behaviour is its own subtest and gets a fresh, empty store from the
// harness, which must register any cleanup with t.Cleanup.
package dstest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Harness returns a fresh, empty store for one subtest.
type Harness func(t *testing.T) *datastore.Store

// RunConformanceTests runs the whole suite against the stores newStore makes.
func RunConformanceTests(t *testing.T, newStore Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *datastore.Store)
	}{
		{"PutGetStat", testPutGetStat},
		{"EmptyAndMultiChunkFiles", testSizes},
		{"Metadata", testMetadata},
		{"InvalidPaths", testInvalidPaths},
		{"DeleteLeavesTombstone", testDelete},
		{"ListPaged", testList},
		{"StatManyKnownPaths", testStatMany},
		{"ChangesLatestOnlyInOrder", testChanges},
		{"ChangesPaged", testChangesPaged},
		{"PositionsNotWritersClock", testPositionsNotClock},
		{"PartitionsAndChangedPartitions", testPartitions},
		{"FencedCommit", testFencedCommit},
		{"CommitLargerThanOneWrite", testLargeCommit},
		{"CommitRefusesBadEntries", testBadEntries},
		{"ReclaimUploadsAndVersions", testReclaim},
		{"TombstoneHorizon", testHorizon},
		{"KilledWriterLeavesNothingVisible", testKilledWriter},
		{"Records", testRecords},
		{"ConcurrentWritersOneModel", func(t *testing.T, s *datastore.Store) { testConcurrent(t, s, 1) }},
		{"ConcurrentWritersManyModels", func(t *testing.T, s *datastore.Store) { testConcurrent(t, s, 8) }},
		{"ReaderRacesWriter", testReaderRacesWriter},
		{"Namespaces", testNamespaces},
		{"DropPartition", testDropPartition},
		{"DropPartitionIfDeleted", testDropIfDeleted}, // dropguard.go
		{"Close", testClose},
		{"CommitProvedAgainstUpload", testCommitProved},
		{"ChunksImmutable", testChunksImmutable},
		{"DamagedReads", testDamagedReads},
		{"FileOrDirectory", testFileOrDirectory},                 // clash.go
		{"ModelsOfSeveralSegments", testModelsOfSeveralSegments}, // models.go
		{"LayoutOfOlderDatastore", testLayoutOfOlderDatastore},
		{"KilledCommitsAllOrNothing", testKilledCommits},         // atomic.go
		{"CrossPartitionClashRace", testCrossPartitionClashRace}, // clashrace.go
		{"InlineSmallFiles", testInline},                         // inline.go
		{"StatSeesCommitWhole", testStatSeesCommitWhole},         // wholeread.go
		{"ListSeesCommitWhole", testListSeesCommitWhole},
		{"RegistryRecordDamaged", testRegistryRecordDamaged}, // registry.go
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func put(t *testing.T, s *datastore.Store, path, content string) datastore.Info {
	t.Helper()
	info, err := s.Put(t.Context(), path, strings.NewReader(content), []byte("meta:"+path))
	if err != nil {
		t.Fatalf("Put(%q): %v", path, err)
	}
	return info
}

func wantContent(t *testing.T, s *datastore.Store, path, want string) datastore.Info {
	t.Helper()
	info, got, err := s.Get(t.Context(), path)
	if err != nil {
		t.Fatalf("Get(%q): %v, want %d bytes", path, err, len(want))
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("Get(%q) = %d bytes, want %d bytes (%.20q)", path, len(got), len(want), want)
	}
	return info
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
	if !strings.Contains(err.Error(), "lake: ") {
		t.Fatalf("%s: error %q does not say it comes from lake", what, err)
	}
}

func wantNotFound(t *testing.T, s *datastore.Store, path string) {
	t.Helper()
	_, _, err := s.Get(t.Context(), path)
	wantErr(t, "Get("+path+")", err, metastore.ErrNotFound)
	_, err = s.Stat(t.Context(), path)
	wantErr(t, "Stat("+path+")", err, metastore.ErrNotFound)
}

// pullAll drains partition's changes after after.
func pullAll(t *testing.T, s *datastore.Store, partition string, after uint64) ([]datastore.Info, uint64) {
	t.Helper()
	var all []datastore.Info
	for {
		ch, upTo, err := s.Changes(t.Context(), partition, after, 1000)
		if err != nil {
			t.Fatalf("Changes(%q, %d): %v", partition, after, err)
		}
		all = append(all, ch...)
		if len(ch) < 1000 {
			return all, upTo
		}
		after = upTo
	}
}

func paths(infos []datastore.Info) string {
	var out []string
	for _, i := range infos {
		s := fmt.Sprintf("%s@%d", i.Path, i.Pos)
		if i.Deleted {
			s += "(deleted)"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}
