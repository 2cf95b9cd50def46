package s3fs

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/lakemeta/lake/datastore"
)

// Heads known by their ETags (issue 31). A sync of one changed file reads,
// beside the listings of its namespace's heads and of the catalog's (its
// pull), the head of the changed file's partition and the head holding its
// model's catalog row: two GETs of heads that, more often than not, the
// tree's own last sync wrote, and that the listings show unchanged since.
// So each head this process reads or writes is kept with its ETag, and a
// Stat beside a listing (readahead.go) that shows a partition's head at a
// kept ETag takes the kept body instead of a GET. A tree keeps them across
// its syncs (datastore.HeadRememberer: RememberedHeads, RememberHeads).
//
// A kept body is used only when its MD5 is the ETag, which S3 makes the
// ETag of an object written in one PUT without SSE-KMS or SSE-C: then the
// listing's ETag names exactly that content, whoever wrote it and whatever
// a tree's state file says. Where ETags are not MD5s (a bucket encrypted
// with KMS), nothing kept is ever used and every head is read, as before.
// The body is what a GET at the listing's instant would have returned,
// which is the instant the Stat beside it already answers for
// (listedClean).

// knownHead is a head's body and the ETag it was read or written with.
type knownHead struct {
	ETag string `json:"e"`
	Body []byte `json:"b"`
}

const (
	// knownHeadsMax bounds the heads kept in a process.
	knownHeadsMax = 64
	// knownHeadBytes: a bigger head is not kept.
	knownHeadBytes = 160 << 10
	// rememberedBytes bounds what RememberedHeads returns: the bodies
	// written last first.
	rememberedBytes = 512 << 10
)

// headMemory holds the heads a process read or wrote, by object key.
type headMemory struct {
	mu    sync.Mutex
	heads map[string]knownHead
	order []string // keys, the one kept last at the end
}

// put keeps key's head as read or written with etag.
func (m *headMemory) put(key, etag string, body []byte) {
	if etag == "" || len(body) > knownHeadBytes {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.heads == nil {
		m.heads = map[string]knownHead{}
	}
	if i := slices.Index(m.order, key); i >= 0 {
		m.order = append(m.order[:i], m.order[i+1:]...)
	}
	m.heads[key] = knownHead{ETag: etag, Body: body}
	m.order = append(m.order, key)
	for len(m.order) > knownHeadsMax {
		delete(m.heads, m.order[0])
		m.order = m.order[1:]
	}
}

// get returns key's kept body if it was kept with etag and its MD5 is
// that ETag.
func (m *headMemory) get(key, etag string) ([]byte, bool) {
	m.mu.Lock()
	k, ok := m.heads[key]
	if ok && k.ETag == etag {
		// Used again: kept as long as one kept last (a namespace's
		// record is read every sync and written seldom).
		if i := slices.Index(m.order, key); i >= 0 {
			m.order = append(append(m.order[:i:i], m.order[i+1:]...), key)
		}
	}
	m.mu.Unlock()
	if !ok || k.ETag != etag || !md5Is(etag, k.Body) {
		return nil, false
	}
	return k.Body, true
}

// has reports whether a head of key is kept.
func (m *headMemory) has(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.heads[key]
	return ok
}

// md5Is reports whether etag is the MD5 of body.
func md5Is(etag string, body []byte) bool {
	sum := md5.Sum(body)
	return strings.Trim(etag, `"`) == hex.EncodeToString(sum[:])
}

// RememberedHeads implements datastore.HeadRememberer: the heads this
// process read or wrote (and those it was given), the last first, at most
// rememberedBytes of them, as JSON.
func (d *Driver) RememberedHeads() []byte {
	m := &d.c.known
	m.mu.Lock()
	out := map[string]knownHead{}
	size := 0
	for i := len(m.order) - 1; i >= 0; i-- {
		k := m.heads[m.order[i]]
		if size+len(k.Body) > rememberedBytes {
			break
		}
		size += len(k.Body)
		out[m.order[i]] = k
	}
	m.mu.Unlock()
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}

// RememberHeads implements datastore.HeadRememberer: it keeps the heads b
// names (RememberedHeads of another process), as if read; what is not
// such JSON is ignored, and a body is used only if its MD5 is the ETag a
// listing shows (get).
func (d *Driver) RememberHeads(b []byte) {
	var in map[string]knownHead
	if json.Unmarshal(b, &in) != nil {
		return
	}
	for key, k := range in {
		d.c.known.put(key, k.ETag, k.Body)
	}
}

var _ datastore.HeadRememberer = (*Driver)(nil)

// listedHead returns what the heads listing a read-ahead made beside a
// Stat (listingsKey) shows of part's head, once that listing is done: its
// ETag, or listed false when the listing shows neither the head nor a
// pending mark of part (with the marks beside the heads: part had no head
// at the listing's instant, the instant the Stat answers for, so there is
// nothing to read; issue 31: a first sync read each new model's absent
// head). ok is false when there is no such listing, or when the head is
// neither kept nor possibly absent (a datastore whose marks are under p/):
// then without waiting, as a GET serves either way.
func (d *Driver) listedHead(ctx context.Context, part string) (etag string, listed, ok bool) {
	ra, _ := ctx.Value(listingsKey{}).(*readAhead)
	if ra == nil || ra.c != d.c || (!d.c.known.has(d.headKey(part)) && !d.marksBesideHeads()) {
		return "", false, false
	}
	keys, ok := ra.listing(ctx, d.prefix)
	if !ok {
		return "", false, false
	}
	hk := d.headKey(part)
	marked := false
	for _, k := range keys {
		if k.key == hk {
			return k.etag, true, true
		}
		if p, _, isMark := d.pendingOf(k.key); isMark && p == part {
			marked = true
		}
	}
	if marked || !d.marksBesideHeads() {
		return "", false, false // read it: a mark without its head is not lake's order
	}
	return "", false, true
}
