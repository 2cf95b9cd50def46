package dynamofs

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/datastore"
)

// A staging transaction without a read (issue 31). Each staging
// transaction of a staged commit read the items it was about to write
// (snapshot.go): a TransactGetItems a transaction, 6 of a first sync of 300
// files. After the first, almost all of it is known or can only be one
// thing:
//
//   - the heads and counters the commit's earlier transactions wrote, and
//     the items they read (the directories above its files, the heads of
//     the partitions they claimed): the commit keeps them (stagedNote.state)
//     as its last transaction to land left them;
//   - the file item of a new path, the file item of its model's own
//     directory (data/T/I) and the head of the deeper model its path could
//     be the directory of: absent, almost always;
//   - the head of a partition in a shard whose counter this process last
//     read at 0 (nothing was ever indexed there): absent;
//   - a shard counter: as this process last read it (ChangedPartitions,
//     seenCounters).
//
// Why a guess cannot make a commit wrong: every guessed item is one the
// transaction conditions on, in the same write, as it would on a read (a
// file's Put on its absence, the model directory's ConditionCheck, a head's
// CAS on its seq and guard, a counter's CAS on its value); a wrong guess
// fails the transaction, nothing is written, and it is built again after a
// read (commitOnceIfLayout forgets the state). An item the transaction
// does not condition on (a directory above a file in another partition, a
// path to delete) is never guessed: it must have been read by an earlier
// transaction of the commit, and what those read is vouched for by the
// heads' CAS exactly as in one read (a commit in between moves a head this
// one conditions on), or the transaction reads.

// predictStaging returns the items a staging transaction of entries would
// read (keys) of commit ctx's staged commit, without reading (nil for an
// absent item), when every key is known or guessed by the rules above; ok
// is false otherwise (and for any commit not staged).
func (d *Driver) predictStaging(ctx context.Context, entries []datastore.Entry, keys []item) (map[string]item, bool) {
	n, _ := ctx.Value(stagedNoteKey{}).(*stagedNote)
	if n == nil || n.state == nil {
		return nil, false
	}
	absent := map[string]bool{}
	for _, e := range entries {
		if e.Put == nil {
			continue
		}
		p := e.Put.Path
		part := d.partition(p)
		absent[itemID(key(d.filePK(part), p))] = true
		if dir := datastore.ModelPrefix + part; d.partition(dir) != part && strings.HasPrefix(p, dir+"/") {
			absent[itemID(key(d.filePK(d.partition(dir)), dir))] = true // ConditionChecked (clash.go)
		}
		if model, ok := d.modelDirOf(p); ok && model != part {
			absent[itemID(d.headKey(model))] = true // guarded (claims.go)
		}
	}
	cur := map[string]item{}
	for _, k := range keys {
		id := itemID(k)
		if it, ok := n.state[id]; ok {
			if it != nil {
				cur[id] = it
			}
			continue
		}
		if absent[id] {
			continue
		}
		pk := getS(k, attrPK)
		if strings.HasPrefix(pk, d.pk("x#")) {
			sh := shard(getS(k, attrSK))
			if v, ok := d.counterOf(n, sh); ok && v == 0 {
				continue // a head in a shard nothing was indexed in
			}
			return nil, false
		}
		if strings.HasPrefix(pk, d.pk("n#")) {
			sh := strings.TrimPrefix(pk, d.pk("n#"))
			v, ok := d.counterOf(n, sh)
			if !ok {
				return nil, false
			}
			if v > 0 {
				it := d.counterKey(sh)
				it["n"] = num(v)
				cur[id] = it
			}
			continue
		}
		return nil, false
	}
	return cur, true
}

// counterOf is shard sh's counter as commit n's earlier transactions left
// it, or as this process last read it.
func (d *Driver) counterOf(n *stagedNote, sh string) (uint64, bool) {
	if it, ok := n.state[itemID(d.counterKey(sh))]; ok {
		return getN(it, "n"), true
	}
	return d.seen.counter(d.pfx, sh)
}

// noteBuilt records, for the staging transaction of commit ctx being built,
// the state it read (cur; keys absent from it were read or guessed absent)
// and the items it writes as they will be once it lands (after), so that
// the commit's next transaction can be built from them (predictStaging)
// once this one landed (noteStaged).
func noteBuilt(ctx context.Context, keys []item, cur, after map[string]item) {
	n, _ := ctx.Value(stagedNoteKey{}).(*stagedNote)
	if n == nil {
		return
	}
	next := map[string]item{}
	for _, k := range keys {
		next[itemID(k)] = nil
	}
	maps.Copy(next, cur)
	maps.Copy(next, after)
	n.built = next
}

// forgetState drops what commit ctx's staging transactions read and wrote:
// a transaction failed or something else was written since, so the next
// one reads.
func forgetState(ctx context.Context) {
	if n, _ := ctx.Value(stagedNoteKey{}).(*stagedNote); n != nil {
		n.state, n.built = nil, nil
	}
}

// headAfter is head h (nil: absent) of key k as a commit's Update leaves
// it: set's attributes set, mark set unless it is already, claims added to
// subs and guard bumped when bump.
func headAfter(k, h item, set map[string]types.AttributeValue, mark string, markAt uint64, claims []string, bump bool) item {
	out := maps.Clone(h)
	if out == nil {
		out = maps.Clone(k)
	}
	maps.Copy(out, set)
	if mark != "" && out[mark] == nil {
		out[mark] = num(markAt)
	}
	if len(claims) > 0 {
		subs := slices.Concat(getSS(out, "subs"), claims)
		slices.Sort(subs)
		out["subs"] = &types.AttributeValueMemberSS{Value: slices.Compact(subs)}
	}
	if bump {
		out["guard"] = num(getN(out, "guard") + 1)
	}
	return out
}

// seenCounters are the shard counters this process last read, per
// namespace prefix (ChangedPartitions), moved by the commits it made
// since: a staging transaction's guess of a counter it did not read
// (predictStaging), which its CAS checks.
type seenCounters struct {
	mu sync.Mutex
	n  map[string]map[string]uint64 // namespace prefix → shard name → counter
}

func (s *seenCounters) read(pfx string, now [Shards]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]map[string]uint64{}
	}
	m := make(map[string]uint64, Shards)
	for i, name := range shardNames() {
		m[name] = now[i]
	}
	s.n[pfx] = m
}

// wrote moves the counters of namespace pfx that a commit of this process
// set (shard → value), if they were read.
func (s *seenCounters) wrote(pfx string, after map[string]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.n[pfx]
	for sh, v := range after {
		if n, ok := m[sh]; ok && v > n {
			m[sh] = v
		}
	}
}

func (s *seenCounters) counter(pfx, sh string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.n[pfx][sh]
	return n, ok
}
