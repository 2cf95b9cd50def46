package dstest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// testModelsOfSeveralSegments: seed 004's own paths, with a type of two
// segments, are one partition per model (issue 30): each model has its own
// head and feed, a drop takes one model only, and a path of the short
// reading (type command, id shell) is a partition of its own.
func testModelsOfSeveralSegments(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	u1 := []string{"data/command/shell/u1/model.yaml", "data/command/shell/u1/result/1/raw", "data/command/shell/u1/result/1/metadata.yaml"}
	u2 := []string{"data/command/shell/u2/result/1/raw"}
	short := "data/command/shell/u1/1/raw" // model command/shell: data u1, version 1
	web := "data/@webframp/system/w1-i3/out/7/raw"
	for _, p := range append(append(append([]string{}, u1...), u2...), short, web) {
		put(t, s, p, "x:"+p)
	}
	want := map[string]string{
		"command/shell/u1":       strings.Join([]string{u1[0] + "@1", u1[1] + "@2", u1[2] + "@3"}, " "),
		"command/shell/u2":       u2[0] + "@1",
		"command/shell":          short + "@1",
		"@webframp/system/w1-i3": web + "@1",
	}
	for part, feed := range want {
		n := uint64(strings.Count(feed, " ") + 1)
		// On a driver of sparse positions, u1's and u2's claims above
		// them took positions in command/shell, and the put of short
		// a guard's in u1 (SparsePositions).
		ch, upTo := pullAll(t, s, part, 0)
		feedIs(t, s, "feed of "+part, ch, upTo, feed, n)
		if h, err := s.Head(ctx, part); err != nil || h.Seq != upTo {
			t.Fatalf("Head(%s) = %+v, %v; want seq %d", part, h, err, upTo)
		}
	}
	parts, err := s.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for part := range want {
		if !slices.Contains(parts, part) {
			t.Fatalf("Partitions = %v, want %s among them", parts, part)
		}
	}
	st, err := s.StatMany(ctx, []string{u1[1], u2[0], short})
	if err != nil || st[u1[1]].Partition != "command/shell/u1" || st[u2[0]].Partition != "command/shell/u2" || st[short].Partition != "command/shell" {
		t.Fatalf("StatMany = %+v, %v", st, err)
	}
	all, err := s.ListAll(ctx, "data/command/shell/")
	if err != nil || len(all) != 5 {
		t.Fatalf("ListAll(data/command/shell/) = %s, %v; want the 5 files of 3 models", paths(all), err)
	}
	below, err := s.ListAll(ctx, "data/command/shell/u1/")
	if err != nil || len(below) != 4 {
		t.Fatalf("ListAll(data/command/shell/u1/) = %s, %v; want u1's 3 files and %s", paths(below), err, short)
	}
	// One partition's files alone, though they share a directory.
	if got, err := s.ListPartitionAll(ctx, "command/shell", ""); err != nil || len(got) != 1 || got[0].Path != short {
		t.Fatalf("ListPartitionAll(command/shell) = %s, %v; want %s only", paths(got), err, short)
	}
	if got, err := s.ListPartitionAll(ctx, "command/shell/u1", "data/command/shell/u1/result/"); err != nil || len(got) != 2 {
		t.Fatalf("ListPartitionAll(command/shell/u1, result/) = %s, %v; want its 2 result files", paths(got), err)
	}
	if _, err := s.ListPartitionAll(ctx, "command/shell/u1", "data/command/shell/u2/"); !errors.Is(err, metastore.ErrInvalidArgument) {
		t.Fatalf("ListPartitionAll with a prefix outside the partition: %v", err)
	}
	// A drop of one model leaves the others, even the one whose paths
	// share its directory.
	if _, err := s.DropPartition(ctx, nil, "command/shell/u1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range u1 {
		wantNotFound(t, s, p)
	}
	wantContent(t, s, u2[0], "x:"+u2[0])
	wantContent(t, s, short, "x:"+short)
	ch, upTo := pullAll(t, s, "command/shell", 0)
	feedIs(t, s, "feed of command/shell after the drop of command/shell/u1", ch, upTo, short+"@1", 1)
}

// testLayoutOfOlderDatastore: a datastore written before it recorded a
// layout (here: written under LayoutTypeID with no record, as lake before
// issue 30 did) keeps its partitions when opened: Open finds its data,
// records LayoutTypeID, and reads and writes keep the old partitions.
func testLayoutOfOlderDatastore(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	if _, ok := s.Driver().(datastore.LayoutSetter); !ok {
		t.Skip("the driver computes no partitions itself (a node's client): its node's own store runs this test")
	}
	s.SetLayout(datastore.LayoutTypeID) // lake before issue 30
	p1, p2 := "data/command/shell/u1/result/1/raw", "data/command/shell/u2/result/1/raw"
	put(t, s, p1, "one")
	// The commit recorded the layout it wrote with; lake before issue 30
	// wrote none (the driver's own Records, unchecked, can delete it).
	if v, err := s.Records().GetRecord(ctx, datastore.LayoutKey); err != nil || string(v) != "type-id" {
		t.Fatalf("layout record after a Store's first commit = %q, %v; want type-id", v, err)
	}
	if err := s.Driver().DeleteRecord(ctx, datastore.LayoutKey, []byte("type-id")); err != nil {
		t.Fatal(err)
	}
	old, err := datastore.Open(ctx, s.Driver(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if old.Layout() != datastore.LayoutTypeID {
		t.Fatalf("Open of a datastore with data and no record: layout %v, want type-id", old.Layout())
	}
	if v, err := old.Records().GetRecord(ctx, datastore.LayoutKey); err != nil || string(v) != "type-id" {
		t.Fatalf("layout record = %q, %v; want type-id", v, err)
	}
	wantContent(t, old, p1, "one")
	i2 := put(t, old, p2, "two")
	if i2.Partition != "command/shell" || i2.Pos != 2 {
		t.Fatalf("a put into the older datastore = %+v; want partition command/shell at 2", i2)
	}
	if ch, _ := pullAll(t, old, "command/shell", 0); paths(ch) != p1+"@1 "+p2+"@2" {
		t.Fatalf("feed of command/shell = %s", paths(ch))
	}
	// A second Open reads the record, and the record wins.
	again, err := datastore.Open(ctx, s.Driver(), &datastore.OpenOptions{ReadOnly: true})
	if err != nil || again.Layout() != datastore.LayoutTypeID {
		t.Fatalf("second Open: %v, %v", again.Layout(), err)
	}
	// A Store that would write under another layout than the recorded one
	// is refused before it writes anything.
	other := datastore.New(s.Driver())
	other.SetLayout(datastore.LayoutModels)
	_, err = other.Put(ctx, "data/command/shell/u3/result/1/raw", strings.NewReader("three"), nil)
	if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), "records type-id") {
		t.Fatalf("a commit under the models layout into a type-id datastore: %v", err)
	}
	old.SetLayout(datastore.LayoutTypeID) // the driver is shared: back to the datastore's
	wantNotFound(t, old, "data/command/shell/u3/result/1/raw")
}
