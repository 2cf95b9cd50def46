package dstest

import (
	"errors"
	"strings"
	"testing"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// testRegistryRecordDamaged: a namespace's registry record that is not one
// (a foreign writer's, or damaged) is reported as damage by every read of
// the namespace's configuration (a sync's lifecycle), naming the record
// and lake data check; Check names it, and with Repair moves it aside,
// after which the configuration reads as no policy and a second check is
// clean.
func testRegistryRecordDamaged(t *testing.T, s *datastore.Store) {
	ctx := t.Context()
	ns, err := s.Namespace("reg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Put(ctx, "data/m/1/a", strings.NewReader("a"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Check(ctx, datastore.CheckOptions{}); errors.Is(err, metastore.ErrRefused) {
		t.Skip("the driver has no check")
	}
	key := ns.ConfigRecord()
	recs := s.Records()
	cur, err := recs.GetRecord(ctx, key)
	if err != nil {
		t.Fatalf("the namespace's registry record after its first commit: %v", err)
	}
	if err := recs.CASRecord(ctx, key, metastore.ExpectValue(cur), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Config(ctx); !errors.Is(err, datastore.ErrDamaged) || !strings.Contains(err.Error(), "lake data check") {
		t.Fatalf("Config over a damaged registry record: %v, want damage naming lake data check", err)
	}
	registry := func(rep datastore.CheckReport) []datastore.Problem {
		var out []datastore.Problem
		for _, p := range rep.Problems {
			if strings.Contains(p.What, "registry record") {
				out = append(out, p)
			}
		}
		return out
	}
	rep, err := ns.Check(ctx, datastore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ps := registry(rep); len(ps) != 1 || ps[0].Repaired || ps[0].Fix == "" {
		t.Fatalf("check names %+v, want the registry record once, repairable (all: %v)", ps, rep.Problems)
	}
	// A repair runs under the namespace's lock (a node asks for its fence).
	fence := &datastore.Fence{Key: "lock/rec/reg/sync", Token: []byte("t1")}
	if err := recs.CASRecord(ctx, fence.Key, metastore.ExpectAbsent(), fence.Token); err != nil {
		t.Fatal(err)
	}
	if rep, err = ns.Check(ctx, datastore.CheckOptions{Repair: true, Fence: fence}); err != nil {
		t.Fatal(err)
	}
	if ps := registry(rep); len(ps) != 1 || !ps[0].Repaired {
		t.Fatalf("repair: %+v, want the registry record moved aside", ps)
	}
	if cfg, err := ns.Config(ctx); err != nil || cfg.Lifecycle.Enabled {
		t.Fatalf("Config after the repair: %+v, %v; want no policy", cfg, err)
	}
	if rep, err = ns.Check(ctx, datastore.CheckOptions{}); err != nil || len(registry(rep)) != 0 {
		t.Fatalf("a check after the repair: %v, %v", rep.Problems, err)
	}
}
