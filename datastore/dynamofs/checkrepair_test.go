package dynamofs_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/ddblocal"
)

// TestCheckRepairsHeadsCountersItems (issue 28, item 4): damage another
// client of the table writes with the raw SDK (a deleted head, a head set
// behind its partition, a head without its feed position, a wrong shard
// counter, garbage file items, a copy of a file item at another path's
// position) is each reported by Check naming the item; Repair rebuilds
// what the partition's items determine and moves the rest aside under a
// quarantine key named in the report; a second check is clean, every file
// is read, pulled and listed, every partition is in the feed, and commits
// land.
func TestCheckRepairsHeadsCountersItems(t *testing.T) {
	d := newDriver(t)
	s := datastore.New(d)
	ctx := t.Context()
	// Six partitions in six shards, so that each damage is its own.
	parts := map[string]string{}
	for _, m := range []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"} {
		p := "m/" + m
		if len(parts) < 6 && !func() bool {
			for q := range parts {
				if shardOf(q) == shardOf(p) {
					return true
				}
			}
			return false
		}() {
			parts[p] = "data/" + p + "/a"
		}
	}
	if len(parts) < 6 {
		t.Fatalf("found only %d partitions in distinct shards", len(parts))
	}
	var names []string
	for p := range parts {
		names = append(names, p)
	}
	slices.Sort(names)
	files := map[string]string{} // path → content
	for _, p := range names {
		for _, f := range []string{parts[p], "data/" + p + "/b"} {
			if _, err := s.Put(ctx, f, strings.NewReader(f), nil); err != nil {
				t.Fatal(err)
			}
			files[f] = f
		}
	}
	_, cursor, err := s.ChangedPartitions(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Check(ctx, datastore.CheckOptions{Chunks: true}); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("check of a sound table: %v, %v", rep.Problems, err)
	}
	raw, table := ddblocal.Client(t), d.Table()
	k := func(pk, sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	update := func(key map[string]types.AttributeValue, expr string, vals map[string]types.AttributeValue) {
		t.Helper()
		in := &dynamodb.UpdateItemInput{TableName: &table, Key: key, UpdateExpression: aws.String(expr)}
		if len(vals) > 0 {
			in.ExpressionAttributeValues = vals
		}
		if _, err := raw.UpdateItem(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	pDel, pBehind, pNoFeed, pCounter, pGarbage, pDup := names[0], names[1], names[2], names[3], names[4], names[5]
	// A deleted head.
	if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: k("x#"+shardOf(pDel), pDel)}); err != nil {
		t.Fatal(err)
	}
	// A head set behind its partition's last change.
	update(k("x#"+shardOf(pBehind), pBehind), "SET seq = :s", map[string]types.AttributeValue{":s": n("1")})
	// A head without its feed position.
	update(k("x#"+shardOf(pNoFeed), pNoFeed), "REMOVE pos", nil)
	// A shard counter set back below its head's position.
	update(k("n#"+shardOf(pCounter), "n"), "SET n = :n", map[string]types.AttributeValue{":n": n("0")})
	// Garbage file items: no version; a path of another partition.
	garbageA := k("f#"+pGarbage, "data/"+pGarbage+"/junk")
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: garbageA}); err != nil {
		t.Fatal(err)
	}
	garbageB := k("f#"+pGarbage, "data/elsewhere/9/x")
	garbageB["ver"], garbageB["pos"] = &types.AttributeValueMemberS{Value: "v"}, n("99")
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: garbageB}); err != nil {
		t.Fatal(err)
	}
	// A copy of a file item at another path, at the same position.
	got, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: k("f#"+pDup, parts[pDup]), ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("read %s: %v", parts[pDup], err)
	}
	dup := got.Item
	dup["sk"] = &types.AttributeValueMemberS{Value: "data/" + pDup + "/dup"}
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: dup}); err != nil {
		t.Fatal(err)
	}
	files["data/"+pDup+"/dup"] = parts[pDup]

	want := map[string]string{ // item → what the report says of it
		"x#" + shardOf(pDel) + "/" + pDel:               "missing",
		"x#" + shardOf(pBehind) + "/" + pBehind:         "behind",
		"x#" + shardOf(pNoFeed) + "/" + pNoFeed:         "missing from the feed",
		"x#" + shardOf(pCounter) + "/" + pCounter:       "n#" + shardOf(pCounter) + "/n",
		"f#" + pGarbage + "/data/" + pGarbage + "/junk": "without a version",
		"f#" + pGarbage + "/data/elsewhere/9/x":         "not one of partition",
		"f#" + pDup + "/data/" + pDup + "/dup":          "like",
	}
	rep, err := s.Check(ctx, datastore.CheckOptions{Chunks: true})
	if err != nil {
		t.Fatal(err)
	}
	check := func(rep datastore.CheckReport, repaired bool) {
		t.Helper()
		seen := map[string]bool{}
		for _, p := range rep.Problems {
			t.Logf("%s", p)
			obj := strings.TrimPrefix(p.Object, "dynamodb:"+table+"/")
			w, ok := want[obj]
			if !ok {
				t.Errorf("unexpected problem: %s", p)
				continue
			}
			seen[obj] = true
			if !strings.Contains(p.What, w) {
				t.Errorf("%s: %q, want it to say %q", obj, p.What, w)
			}
			if p.Fix == "" {
				t.Errorf("%s: no repair offered", obj)
			}
			if p.Repaired != repaired {
				t.Errorf("%s: repaired %v, want %v", obj, p.Repaired, repaired)
			}
		}
		for obj := range want {
			if !seen[obj] {
				t.Errorf("check did not report %s", obj)
			}
		}
	}
	check(rep, false)
	// What the damage does before the repair: a pull of the partition
	// whose head was deleted reads nothing.
	if ch, _, err := s.Changes(ctx, pDel, 0, 100); err != nil || len(ch) != 0 {
		t.Fatalf("pull under a deleted head: %d changes, %v; want none (the damage this test repairs)", len(ch), err)
	}

	rep, err = s.Check(ctx, datastore.CheckOptions{Repair: true, Chunks: true})
	if err != nil {
		t.Fatal(err)
	}
	check(rep, true)
	for _, p := range rep.Problems {
		if strings.Contains(p.What, "not one of partition") || strings.Contains(p.What, "without a version") {
			if !strings.Contains(p.Fix, "q#") {
				t.Errorf("%s: the quarantine key is not named: %q", p.Object, p.Fix)
			}
		}
	}
	if rep, err = s.Check(ctx, datastore.CheckOptions{Chunks: true}); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("a check after the repair: %v, %v; want clean", rep.Problems, err)
	}
	// The garbage is aside, under the quarantine keys, whole.
	out, err := raw.Scan(ctx, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	aside := 0
	for _, it := range out.Items {
		if pk := it["pk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, "q#") {
			aside++
			if it["from_pk"] == nil || it["from_sk"] == nil {
				t.Errorf("a quarantined item without its old key: %v", it)
			}
		}
	}
	if aside != 2 {
		t.Errorf("%d items aside, want the 2 garbage items", aside)
	}
	// Every file is read, listed and pulled again.
	for f, body := range files {
		if _, b, err := s.Get(ctx, f); err != nil || string(b) != body {
			t.Errorf("get %s after the repair: %q, %v", f, b, err)
		}
	}
	all, err := s.ListAll(ctx, "data/")
	if err != nil || len(all) != len(files) {
		t.Errorf("ls after the repair: %d files, %v; want %d", len(all), err, len(files))
	}
	for _, p := range []string{pBehind, pNoFeed, pCounter, pDup} {
		ch, _, err := s.Changes(ctx, p, 0, 100)
		wantN := 2
		if p == pDup {
			wantN = 3
		}
		if err != nil || len(ch) != wantN {
			t.Errorf("pull of %s from 0 after the repair: %d changes, %v; want %d", p, len(ch), err, wantN)
		}
	}
	// The repaired partitions are in the feed after the cursor taken before
	// the damage.
	heads, cursor, err := s.ChangedPartitions(ctx, cursor)
	if err != nil {
		t.Fatal(err)
	}
	fed := map[string]bool{}
	for _, h := range heads {
		fed[h.Partition] = true
	}
	for _, p := range []string{pDel, pBehind, pNoFeed, pDup} {
		if !fed[p] {
			t.Errorf("partition %s is not in the feed after its repair (heads %v)", p, heads)
		}
	}
	// Commits land, and the feed reports them.
	for _, p := range names {
		if _, err := s.Put(ctx, "data/"+p+"/c", strings.NewReader("c"), nil); err != nil {
			t.Fatalf("put to %s after the repair: %v", p, err)
		}
	}
	heads, _, err = s.ChangedPartitions(ctx, cursor)
	if err != nil || len(heads) != len(names) {
		t.Errorf("feed after a commit to each partition: %v, %v; want all %d", heads, err, len(names))
	}
	if rep, err = s.Check(ctx, datastore.CheckOptions{Chunks: true}); err != nil || len(rep.Problems) != 0 {
		t.Errorf("a check after the new commits: %v, %v; want clean", rep.Problems, err)
	}
}
