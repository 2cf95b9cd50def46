package s3fs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/datastore/dstest"
	"github.com/lakemeta/lake/datastore/s3fs"
	"github.com/lakemeta/lake/internal/s3local"
	"github.com/lakemeta/lake/metastore"
)

// TestClaimsSeenFromOutside reads what a model's first commit leaves in the
// bucket with a raw S3 client (issue 27): a claim object in data's log
// naming the model, and data's head marked as holding only claims, so that
// Partitions and ChangedPartitions do not name it. A takeover still fences
// data, a file put there later makes it a partition like any other, and a
// foreign client that deletes data's head does not make lake forget the
// claim (the log still holds it) nor let a file over the model in.
func TestClaimsSeenFromOutside(t *testing.T) {
	ctx := t.Context()
	raw, bucket, s := rawStore(t, "lake/claims")
	get := func(key string) map[string]any {
		t.Helper()
		out, err := raw.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		defer out.Body.Close()
		b, _ := io.ReadAll(out.Body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return v
	}
	list := func(prefix string) []string {
		t.Helper()
		out, err := raw.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), prefix))
		}
		return keys
	}
	if _, err := s.Put(ctx, "data/m/1/f", strings.NewReader("f"), nil); err != nil {
		t.Fatal(err)
	}
	claims := list("lake/claims/l/data/")
	if len(claims) != 1 {
		t.Fatalf("data's log after model m/1's first commit = %v; want its one claim", claims)
	}
	if c := get("lake/claims/l/data/" + claims[0]); fmt.Sprint(c["claims"]) != "[m/1]" || c["entries"] != nil {
		t.Fatalf("claim object = %v; want claims [m/1] and no entries", c)
	}
	if h := get("lake/claims/h/data"); h["claimsOnly"] != true || !slices.Contains(h["subs"].([]any), any("m/1")) {
		t.Fatalf("data's head = %v; want claimsOnly and subs [m/1]", h)
	}
	if p, err := s.Partitions(ctx); err != nil || strings.Join(p, ",") != "m/1" {
		t.Fatalf("Partitions = %v, %v; want m/1 only (data holds only claims)", p, err)
	}
	heads, cur, err := s.ChangedPartitions(ctx, "")
	if err != nil || len(heads) != 1 || heads[0].Partition != "m/1" {
		t.Fatalf("ChangedPartitions = %v, %v; want m/1 only", heads, err)
	}

	// A takeover fences data too: a stale holder's first file there is
	// refused like anywhere else.
	lock := "lock/ns/sync"
	if err := s.Records().CASRecord(ctx, lock, metastore.ExpectAbsent(), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FenceTakeover(ctx, &datastore.Fence{Key: lock, Token: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if got := list("lake/claims/l/data/"); len(got) != 2 {
		t.Fatalf("data's log after a takeover = %v; want the claim and a fence entry", got)
	}
	if heads, cur, err = s.ChangedPartitions(ctx, cur); err != nil || len(heads) != 1 || heads[0].Partition != "m/1" {
		t.Fatalf("ChangedPartitions after the takeover = %v, %v; want m/1 (its fence entry), not data", heads, err)
	}

	// A file put in data makes it a partition like any other.
	if _, err := s.Put(ctx, "data/README", strings.NewReader("r"), nil); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Partitions(ctx); err != nil || strings.Join(p, ",") != "data,m/1" {
		t.Fatalf("Partitions after a file in data = %v, %v", p, err)
	}
	if heads, _, err := s.ChangedPartitions(ctx, cur); err != nil || len(heads) != 1 || heads[0].Partition != "data" {
		t.Fatalf("ChangedPartitions after a file in data = %v, %v; want data", heads, err)
	}

	// A foreign client deletes data's head: the claim is still read from
	// the log, and a file over the model is refused by a process that
	// never saw the head.
	if _, err := raw.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("lake/claims/h/data")}); err != nil {
		t.Fatal(err)
	}
	d2, err := s3fs.Open(ctx, s3local.Client(t), s3fs.Options{Bucket: bucket, Prefix: "lake/claims"})
	if err != nil {
		t.Fatal(err)
	}
	other := datastore.New(d2)
	defer other.Close()
	_, err = other.Put(ctx, "data/m/1", strings.NewReader("over"), nil)
	if cl, ok := datastore.AsClash(err); !ok || !errors.Is(err, metastore.ErrConflict) || cl.Other != "data/m/1/f" {
		t.Fatalf("a file over model m/1 after data's head was deleted: %v", err)
	}
}

// TestDropForgetsClaims: a dropped model's name leaves the Subs of the
// heads it claimed (read with a raw S3 client), so that a loop of
// disposable models (seed 004) does not grow data's head without bound;
// made again, the model claims again, and a file over it is refused.
func TestDropForgetsClaims(t *testing.T) {
	ctx := t.Context()
	raw, bucket, s := rawStore(t, "lake/forget")
	subs := func() string {
		t.Helper()
		return strings.Join(rawSubs(t, raw, bucket, "lake/forget/h/data"), ",")
	}
	put := func(p string) error {
		_, err := s.Put(ctx, p, strings.NewReader("x"), nil)
		return err
	}
	if err := put("data/m/keep/f"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		m := fmt.Sprintf("m/d%02d", i)
		if err := put("data/" + m + "/f"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DropPartition(ctx, nil, m); err != nil {
			t.Fatal(err)
		}
	}
	if got := subs(); got != "m/keep" {
		t.Fatalf("data's Subs after 10 models made and dropped = %q; want m/keep only", got)
	}
	if err := put("data/m/d03/g"); err != nil {
		t.Fatal(err)
	}
	if got := subs(); got != "m/d03,m/keep" {
		t.Fatalf("data's Subs after m/d03 was made again = %q", got)
	}
	err := put("data/m/d03")
	if cl, ok := datastore.AsClash(err); !ok || cl.Other != "data/m/d03/g" {
		t.Fatalf("a file over the model made again: %v", err)
	}
}

// TestForgedClaimsOnlyHead: a foreign client marks data, a partition that
// holds a file, as holding only claims (a raw PutObject of its head): Partitions
// leaves it out, lake data check names the head, and --repair clears the
// mark, after which the partition is listed again.
func TestForgedClaimsOnlyHead(t *testing.T) {
	ctx := t.Context()
	raw, bucket, s := rawStore(t, "lake/forged")
	if _, err := s.Put(ctx, "data/README", strings.NewReader("r"), nil); err != nil {
		t.Fatal(err)
	}
	key := "lake/forged/h/data"
	out, err := raw.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	err = json.NewDecoder(out.Body).Decode(&h)
	out.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	h["claimsOnly"] = true
	forged, _ := json.Marshal(h)
	rawPut(t, raw, bucket, key, string(forged))
	if p, err := s.Partitions(ctx); err != nil || slices.Contains(p, "data") {
		t.Fatalf("Partitions with the forged head = %v, %v; the mark hides it (what check must find)", p, err)
	}
	rep, err := s.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Object, "h/data") || !strings.Contains(rep.Problems[0].What, "only directory claims") {
		t.Fatalf("check = %+v; want the forged head named", rep.Problems)
	}
	if rep, err = s.Check(ctx, datastore.CheckOptions{Repair: true}); err != nil || rep.Unrepaired() != 0 {
		t.Fatalf("check --repair = %+v, %v", rep.Problems, err)
	}
	if p, err := s.Partitions(ctx); err != nil || !slices.Contains(p, "data") {
		t.Fatalf("Partitions after the repair = %v, %v; want data", p, err)
	}
}

// TestClaimsOnlyHeadReadWithoutItsLog (issue 31): a changed head that holds
// only claims (data's, moved by another process's new model) is read, and
// its log is not listed: no answer reports a claims-only partition, whatever
// its log holds past the watermark. The partitions with files that changed
// are reported as before, and the next read from the answer finds nothing.
func TestClaimsOnlyHeadReadWithoutItsLog(t *testing.T) {
	ctx := t.Context()
	c, bucket := s3local.Client(t), s3local.Bucket(t)
	d, s := openDatastore(t, c, bucket, "co")
	_, other := openDatastore(t, c, bucket, "co")
	commitModels(t, s, "t/m") // its claim makes data a claims-only partition
	cur := dstest.ReadCursor(t, s)
	theirs := commitModels(t, other, "t/n") // another claim in data, and t/n's first files
	before := d.Requests()
	heads, next, err := s.ChangedPartitions(ctx, cur)
	sent := d.Requests()
	if err != nil || dstest.HeadNames(heads) != fmt.Sprintf("t/n@%d", theirs[0].Pos) {
		t.Fatalf("changed partitions: %s, %v; want t/n@%d", dstest.HeadNames(heads), err, theirs[0].Pos)
	}
	// The LIST of the heads; the GETs of t/n's and data's heads (data's
	// log was listed too before, and t/n's until ChangedPartitions took
	// a head's watermark for its Seq).
	if lists, gets := sent.List-before.List, sent.Get-before.Get; lists != 1 || gets != 2 {
		t.Fatalf("the read sent %d LISTs and %d GETs, want 1 and 2", lists, gets)
	}
	if heads, _, err := s.ChangedPartitions(ctx, next); err != nil || len(heads) != 0 {
		t.Fatalf("the read after the answer: %s, %v; want nothing", dstest.HeadNames(heads), err)
	}
}

// rawSubs reads the head at key with a raw S3 client and returns the
// models it names among its claims (its Subs).
func rawSubs(t *testing.T, raw *s3.Client, bucket, key string) []string {
	t.Helper()
	out, err := raw.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	var h struct{ Subs []string }
	if err := json.NewDecoder(out.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h.Subs
}
