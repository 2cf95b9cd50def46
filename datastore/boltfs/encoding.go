package boltfs

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/internal/boltfile"
)

// NB: the JSON field names are part of the file format.
type fileRec struct {
	Pos     uint64 `json:"pos"`
	Deleted bool   `json:"del,omitempty"`
	Version string `json:"ver,omitempty"`
	Size    int64  `json:"size"`
	Chunks  int    `json:"chunks"`
	SHA256  string `json:"sha256,omitempty"`
	Meta    []byte `json:"meta,omitempty"`
	// Inline is the content of a file stored inline (Chunks 0); absent
	// from records written before inline storage and for chunked files.
	Inline []byte `json:"inl,omitempty"`
	Time   int64  `json:"t"` // unix nanoseconds
}

type headRec struct {
	Seq   uint64 `json:"seq"`
	Floor uint64 `json:"floor,omitempty"`
	ISeq  uint64 `json:"iseq"`
}

type intentRec struct {
	Path    string `json:"path"`
	Started int64  `json:"started"`
}

func (r fileRec) info(path, part string) datastore.Info {
	return datastore.Info{Path: path, Partition: part, Pos: r.Pos, Deleted: r.Deleted,
		Version: r.Version, Size: r.Size, Chunks: r.Chunks, SHA256: r.SHA256, Meta: r.Meta, Inline: r.Inline, Time: time.Unix(0, r.Time)}
}

func getJSON(b *boltfile.Bucket, key []byte, v any) (bool, error) {
	if b == nil {
		return false, nil // a bucket not yet made holds nothing
	}
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := jsonUnmarshal(raw, v, key); err != nil {
		return false, err
	}
	return true, nil
}

func putJSON(b *boltfile.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func feedKey(partition string, pos uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(partition), 0), pos)
}

func chunkKey(version string, i int) []byte {
	return binary.BigEndian.AppendUint32([]byte(version+"/"), uint32(i))
}

// timeKey prefixes rest with t in big-endian nanoseconds, so that a cursor
// walks the bucket oldest first.
func timeKey(t time.Time, rest string) []byte {
	return append(u64(uint64(t.UnixNano())), rest...)
}
