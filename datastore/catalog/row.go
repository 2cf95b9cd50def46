package catalog

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lakemeta/lake/datastore"
)

// DefinitionFile is the name of a model's definition in its partition
// (datastore.DefinitionFile, which the layout reads as the model's).
const DefinitionFile = datastore.DefinitionFile

// DefinitionPath returns the path of model's definition:
// data/TYPE/ID/model.yaml.
func DefinitionPath(model string) string {
	return datastore.ModelPrefix + model + "/" + DefinitionFile
}

// The states of a model.
const (
	// Live: its definition exists.
	Live = "live"
	// Orphaned: its definition was deleted; its data is the lifecycle's
	// to prune after the retention.
	Orphaned = "orphaned"
	// Undefined: data without a definition, ever. Never pruned as
	// orphaned.
	Undefined = "undefined"
)

// Row is the catalog's entry of one model.
//
// NB: the JSON names are a stored format.
type Row struct {
	Namespace string `json:"ns"`
	Model     string `json:"model"`
	State     string `json:"state"`
	// Created is when the catalog first saw the model; Updated the time of
	// its latest change; Deleted when its definition was deleted (zero
	// unless Orphaned).
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Deleted time.Time `json:"deleted,omitzero"`
	// Files and Bytes count the live files of the model, definition
	// included.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Entries are the model's data entries (data/TYPE/ID/NAME/…), by name.
	// When they would not fit one row, Entries is empty and
	// EntriesOmitted says how many there are.
	Entries        []Entry `json:"entries,omitempty"`
	EntriesOmitted int     `json:"entriesOmitted,omitempty"`
	// Pos is the model partition's feed position the row reflects.
	Pos uint64 `json:"pos"`
}

// Entry is one data entry of a model: data/TYPE/ID/NAME/VERSION/….
type Entry struct {
	Name string `json:"name"`
	// Versions oldest first: by the position of their latest change.
	Versions []Version `json:"versions"`
}

// Version is one version of a data entry.
type Version struct {
	Name  string `json:"name"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
	Pos   uint64 `json:"pos"`
}

// rowPath is the catalog path of a model's row: NAMESPACE/TYPE/ID for a
// model of two segments (as rows always were), and NAMESPACE/ then the
// model escaped as one segment (url.PathEscape: command%2Fshell%2Fu1) for a
// model of more, whose directory may hold another model's (command/shell
// and command/shell/u1): a row path is never a directory of another.
func rowPath(namespace, model string) string {
	if strings.Count(model, "/") == 1 {
		return namespace + "/" + model
	}
	return namespace + "/" + url.PathEscape(model)
}

// parseRowPath splits a catalog path into namespace and model.
func parseRowPath(p string) (namespace, model string, ok bool) {
	namespace, model, ok = strings.Cut(p, "/")
	if !ok {
		return "", "", false
	}
	if strings.Contains(model, "/") {
		return namespace, model, strings.Count(model, "/") == 1
	}
	m, err := url.PathUnescape(model)
	return namespace, m, err == nil && strings.Count(m, "/") > 1 && url.PathEscape(m) == model
}

// decodeRow reads the row in a catalog file's metadata.
func decodeRow(info datastore.Info) (Row, error) {
	var r Row
	if err := json.Unmarshal(info.Meta, &r); err != nil {
		return Row{}, fmt.Errorf("lake: catalog row %q is corrupt: %v", info.Path, err)
	}
	return r, nil
}

// encodeRow returns the row's JSON, leaving out the entries (and counting
// them in EntriesOmitted) when the whole row would not fit a file's
// metadata.
func encodeRow(r Row) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("lake: encode catalog row: %w", err)
	}
	if len(b) <= datastore.MaxMetaBytes {
		return b, nil
	}
	r.EntriesOmitted, r.Entries = len(r.Entries), nil
	return json.Marshal(r)
}

// buildRow computes a model's row from its live files (as listed) and its
// definition's state, keeping what the previous row knew (created, and the
// deletion of a definition whose tombstone is gone).
func buildRow(namespace, model string, files []datastore.Info, def *datastore.Info, prev *Row, pos uint64, now time.Time) Row {
	r := Row{Namespace: namespace, Model: model, State: Undefined, Created: now, Pos: pos}
	if prev != nil {
		r.Created = prev.Created
		if prev.State == Orphaned {
			r.State, r.Deleted = Orphaned, prev.Deleted
		}
	}
	switch {
	case def != nil && !def.Deleted:
		r.State, r.Deleted = Live, time.Time{}
	case def != nil && def.Deleted && r.State != Orphaned:
		r.State, r.Deleted = Orphaned, def.Time.UTC()
	}
	if def != nil {
		r.Updated = def.Time.UTC()
	}
	entries := map[string]map[string]*Version{}
	prefix := datastore.ModelPrefix + model + "/"
	for _, f := range files {
		r.Files++
		r.Bytes += f.Size
		if f.Time.After(r.Updated) {
			r.Updated = f.Time.UTC()
		}
		rest := strings.TrimPrefix(f.Path, prefix)
		name, after, ok := strings.Cut(rest, "/")
		if !ok {
			continue // model.yaml and other files directly under the model
		}
		ver, _, _ := strings.Cut(after, "/")
		if entries[name] == nil {
			entries[name] = map[string]*Version{}
		}
		v := entries[name][ver]
		if v == nil {
			v = &Version{Name: ver}
			entries[name][ver] = v
		}
		v.Files++
		v.Bytes += f.Size
		v.Pos = max(v.Pos, f.Pos)
	}
	for name, vs := range entries {
		e := Entry{Name: name}
		for _, v := range vs {
			e.Versions = append(e.Versions, *v)
		}
		slices.SortFunc(e.Versions, func(a, b Version) int { return cmpPos(a.Pos, b.Pos, a.Name, b.Name) })
		r.Entries = append(r.Entries, e)
	}
	slices.SortFunc(r.Entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	if r.Updated.IsZero() {
		r.Updated = now
	}
	return r
}

func cmpPos(a, b uint64, an, bn string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return strings.Compare(an, bn)
}

// RowPath is the path of the row of namespace's model in the catalog
// store, for a caller that reads rows ahead (FoldOptions.Rows).
func RowPath(namespace, model string) string { return rowPath(namespace, model) }

// IsModel reports whether a partition is a model that can have a row.
func IsModel(partition string) bool {
	return strings.Contains(partition, "/") && validModel(partition)
}
