package datastore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lakemeta/lake/metastore"
)

// The partition of a path under each layout (issue 30): types of one or
// more segments get a partition per model under LayoutModels; LayoutTypeID
// keeps the rule of datastores made before.
func TestLayoutPartition(t *testing.T) {
	for _, c := range []struct {
		path, models, typeID string
	}{
		// The seed's layout, types of one segment: both layouts agree.
		{"data/aws/u1/result/1/raw", "aws/u1", "aws/u1"},
		{"data/aws/u1/model.yaml", "aws/u1", "aws/u1"},
		// Types of several segments: one partition per model.
		{"data/command/shell/u1/result/1/raw", "command/shell/u1", "command/shell"},
		{"data/command/shell/u2/result/1/raw", "command/shell/u2", "command/shell"},
		{"data/command/shell/u1/result/42/metadata.yaml", "command/shell/u1", "command/shell"},
		{"data/command/shell/u1/model.yaml", "command/shell/u1", "command/shell"},
		{"data/@webframp/system/w1-i3/out/7/raw", "@webframp/system/w1-i3", "@webframp/system"},
		{"data/@webframp/system/w1-i3/model.yaml", "@webframp/system/w1-i3", "@webframp/system"},
		{"data/a/b/c/d/id/name/1/raw", "a/b/c/d/id", "a/b"},
		// A short and a long reading: the depth from the end decides.
		{"data/command/shell/u1/1/raw", "command/shell", "command/shell"}, // type command, id shell, data u1
		{"data/command/shell/u1/result/latest/raw", "command/shell/u1", "command/shell"},
		{"data/command/shell/u1/latest/raw", "command/shell", "command/shell"}, // data u1, version latest
		// A definition is always a definition, even in a version directory.
		{"data/command/shell/u1/result/1/model.yaml", "command/shell/u1/result/1", "command/shell"},
		{"data/a/b/c/42/model.yaml", "a/b/c/42", "a/b"},
		// Shorter than the layout: the first two segments, as before.
		{"data/x/i/f", "x/i", "x/i"},
		{"data/x/i/a/b", "x/i", "x/i"},
		{"data/command/shell/u1/x", "command/shell", "command/shell"},
		{"data/m/n", "data", "data"},
		{"data/README", "data", "data"},
		{"data/model.yaml", "data", "data"},
		{"data/t/model.yaml", "data", "data"},
		// Outside data/: the first segment.
		{"definitions/x.yaml", "definitions", "definitions"},
		{"README", "README", "README"},
		{"database/a/b/c/d/e/f", "database", "database"},
		{"x/data/a/b/c/d/e", "x", "x"},
		// A segment that only looks like the definition.
		{"data/a/b/c/d/model.yaml.bak", "a/b", "a/b"},
		{"data/a/b/c/d/e/xmodel.yaml", "a/b/c", "a/b"},
		{"data/data/x/n/1/raw", "data/x", "data/x"},
	} {
		if err := ValidatePath(c.path); err != nil {
			t.Fatalf("test path %q is invalid: %v", c.path, err)
		}
		if got := LayoutModels.Partition(c.path); got != c.models {
			t.Errorf("LayoutModels.Partition(%q) = %q, want %q", c.path, got, c.models)
		}
		if got := Partition(c.path); got != c.models {
			t.Errorf("Partition(%q) = %q, want %q (the default layout)", c.path, got, c.models)
		}
		if got := LayoutTypeID.Partition(c.path); got != c.typeID {
			t.Errorf("LayoutTypeID.Partition(%q) = %q, want %q", c.path, got, c.typeID)
		}
		for _, l := range []Layout{LayoutModels, LayoutTypeID} {
			part := l.Partition(c.path)
			if err := ValidatePartition(part); err != nil {
				t.Errorf("%v: partition %q of %q is not valid: %v", l, part, c.path, err)
			}
			if strings.Contains(c.path, "/") && !strings.HasPrefix(c.path, PartitionPrefix(part)) {
				t.Errorf("%v: %q is not under its partition's prefix %q", l, c.path, PartitionPrefix(part))
			}
			if !PrefixMayMatch(part, c.path) || !l.InPartition(c.path, part) {
				t.Errorf("%v: %q does not match its own partition %q", l, c.path, part)
			}
		}
	}
}

func TestLayoutNames(t *testing.T) {
	for _, l := range []Layout{LayoutModels, LayoutTypeID} {
		got, err := ParseLayout(l.String())
		if err != nil || got != l {
			t.Errorf("ParseLayout(%q) = %v, %v", l.String(), got, err)
		}
	}
	for _, name := range []string{"", "Models", "type/id", "models\n", "layout(7)"} {
		if _, err := ParseLayout(name); !errors.Is(err, metastore.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "lake: ") {
			t.Errorf("ParseLayout(%q) = %v, want a lake: invalid argument", name, err)
		}
	}
}

func TestValidatePartitionOfModels(t *testing.T) {
	for _, ok := range []string{"definitions", "data", "t/i", "command/shell/u1", "@webframp/system/w1-i3"} {
		if err := ValidatePartition(ok); err != nil {
			t.Errorf("ValidatePartition(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a//b", "/a", "a/", "a/../b", "a/.lake/b", "a\nb"} {
		if err := ValidatePartition(bad); !errors.Is(err, metastore.ErrInvalidArgument) {
			t.Errorf("ValidatePartition(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// FuzzLayoutPartition: for any valid path, under both layouts, the
// partition is valid, the path lies under its prefix, and a model's
// definition and its data files agree on the model.
func FuzzLayoutPartition(f *testing.F) {
	for _, s := range []string{"data/command/shell/u1/result/1/raw", "data/x/i/f", "data/README", "a/b", "data/a/b/c/d/model.yaml"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		for _, l := range []Layout{LayoutModels, LayoutTypeID} {
			part := l.Partition(p)
			if ValidatePartition(part) != nil || (strings.Contains(p, "/") && !strings.HasPrefix(p, PartitionPrefix(part))) {
				t.Fatalf("%v: %q → partition %q", l, p, part)
			}
			m, ok := l.Model(p)
			if ok != strings.Contains(part, "/") || (ok && m != part) {
				t.Fatalf("%v: %q: Model = %q, %v; Partition = %q", l, p, m, ok, part)
			}
			if ok && ValidatePath(ModelPrefix+m+"/"+DefinitionFile) == nil {
				if d := l.Partition(ModelPrefix + m + "/" + DefinitionFile); d != m && l == LayoutModels {
					t.Fatalf("%v: the definition of %q is in %q", l, m, d)
				}
			}
			if ok && l == LayoutModels && ValidatePath(ModelPrefix+m+"/n/1/raw") == nil {
				if d := l.Partition(ModelPrefix + m + "/n/1/raw"); d != m {
					t.Fatalf("%v: a data file of %q is in %q", l, m, d)
				}
			}
		}
	})
}

// layoutDriver is a Driver whose records and partitions are in memory, for
// Open's choice of a layout.
type layoutDriver struct {
	Driver
	recs  map[string][]byte
	parts []string
	set   Layout
	sets  int
}

func (d *layoutDriver) GetRecord(_ context.Context, k string) ([]byte, error) {
	if v, ok := d.recs[k]; ok {
		return v, nil
	}
	return nil, metastore.ErrNotFound
}

func (d *layoutDriver) CASRecord(_ context.Context, k string, e metastore.Expect, v []byte) error {
	if _, ok := d.recs[k]; ok {
		return metastore.ErrConflict
	}
	d.recs[k] = v
	return nil
}

func (d *layoutDriver) ListRecords(_ context.Context, prefix string) ([]metastore.Item, error) {
	var out []metastore.Item
	for k, v := range d.recs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, metastore.Item{Key: k, Value: v})
		}
	}
	return out, nil
}

func (d *layoutDriver) Namespace(string) (Driver, error)             { return d, nil }
func (d *layoutDriver) Partitions(context.Context) ([]string, error) { return d.parts, nil }
func (d *layoutDriver) SetLayout(l Layout)                           { d.set, d.sets = l, d.sets+1 }

// Open records a layout once: models for a new datastore, type-id for one
// that held data before (it keeps its partitions), and the record wins
// over the data afterwards.
func TestOpenRecordsTheLayout(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		recs   map[string][]byte
		parts  []string
		ro     bool
		want   Layout
		stored string
	}{
		{"new", map[string][]byte{}, nil, false, LayoutModels, "models"},
		{"made before, data in the root", map[string][]byte{}, []string{"command/shell"}, false, LayoutTypeID, "type-id"},
		{"made before, data in a namespace", map[string][]byte{nsRegistryPrefix + "w1": []byte(`{}`)}, nil, false, LayoutTypeID, "type-id"},
		{"recorded models, data", map[string][]byte{LayoutKey: []byte("models")}, []string{"command/shell/u1"}, false, LayoutModels, "models"},
		{"recorded type-id, empty", map[string][]byte{LayoutKey: []byte("type-id")}, nil, false, LayoutTypeID, "type-id"},
		{"read-only records nothing", map[string][]byte{}, []string{"x/i"}, true, LayoutTypeID, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &layoutDriver{recs: c.recs, parts: c.parts, set: 99}
			s, err := Open(ctx, d, &OpenOptions{ReadOnly: c.ro})
			if err != nil {
				t.Fatal(err)
			}
			if s.Layout() != c.want || d.set != c.want || d.sets != 1 {
				t.Fatalf("layout %v, driver told %v (%d times); want %v once", s.Layout(), d.set, d.sets, c.want)
			}
			if got := string(d.recs[LayoutKey]); got != c.stored {
				t.Fatalf("record %q, want %q", got, c.stored)
			}
			ns, err := s.Namespace("w2")
			if err != nil {
				t.Fatal(err)
			}
			p := "data/command/shell/u1/result/1/raw"
			if ns.Partition(p) != c.want.Partition(p) || ns.Layout() != c.want {
				t.Fatalf("namespace's partition of %q: %q under %v", p, ns.Partition(p), ns.Layout())
			}
		})
	}
	d := &layoutDriver{recs: map[string][]byte{LayoutKey: []byte("hash-of-type")}}
	if _, err := Open(ctx, d, nil); !errors.Is(err, metastore.ErrInvalidArgument) || !strings.Contains(err.Error(), "upgrade lake") {
		t.Fatalf("Open of a datastore with an unknown layout: %v", err)
	}
}

// The layout record is written once: Records refuses to change or delete it,
// or to create it with a layout lake does not know, before any I/O.
func TestLayoutRecordWrittenOnce(t *testing.T) {
	ctx := context.Background()
	d := &layoutDriver{recs: map[string][]byte{}}
	s, err := Open(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := s.Records()
	for what, err := range map[string]error{
		"swap":    recs.CASRecord(ctx, LayoutKey, metastore.ExpectValue([]byte("models")), []byte("type-id")),
		"delete":  recs.DeleteRecord(ctx, LayoutKey, []byte("models")),
		"fenced":  recs.FencedRecord(ctx, Fence{Key: "rec/ns/sync", Token: []byte("t")}, LayoutKey, metastore.ExpectValue([]byte("models")), []byte("type-id")),
		"unknown": recs.CASRecord(ctx, LayoutKey, metastore.ExpectAbsent(), []byte("hash")),
	} {
		if !errors.Is(err, metastore.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "lake: ") {
			t.Errorf("%s of the layout record: %v, want a lake: invalid argument", what, err)
		}
	}
	if got := string(d.recs[LayoutKey]); got != "models" {
		t.Fatalf("layout record = %q after refused writes", got)
	}
}
