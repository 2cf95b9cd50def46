package s3fs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lakemeta/lake/datastore"
	"github.com/lakemeta/lake/metastore"
)

// Directory claims: a path is a file or a directory, never both, across
// partitions too, against unfenced concurrent writers (issue 27), as
// DynamoDB's claims.go does it, with S3's one serializing write: the
// conditional create of a partition's next log object.
//
// The files of a model X lie below data/X, and their directories can
// belong to other partitions, X's ancestor partitions A (Layout.ClaimParts: "data"
// and the shallower models whose names are prefixes of X's). A file put at
// one of those directories must be refused while X has a live file below
// it, atomically. Two commits that each create a log object in the same
// partition are ordered by it: the later create fails, its writer reads the
// tail again and sees the earlier. So:
//
//   - The claim (writer of X): a commit of X whose ancestor partition A
//     does not name X among its claims (the head's Subs, and the Claims of
//     the log objects after it), or whose own log is empty (a new or
//     dropped model), is made a staged commit (whole.go) that also creates
//     a claim object in A's log (no entries; Claims: X), whose create is
//     preceded by a check, against A's tail as read for that create, that
//     no directory of X's puts is a live file in A. A put at such a
//     directory since then took A's next position first: the claim's
//     create fails, and the re-read finds it.
//   - The guard (writer of a new file p in partition A): every model X
//     that claimed A and whose files can lie below p is guarded: the
//     commit is made staged, with a guard object in X's log (no entries)
//     whose create is preceded by a check, against X's tail and the index,
//     that no live file of X lies below p. A commit of X since then took
//     X's position first (the guard's re-read finds its file); one after
//     it meets the staged guard, waits for its commit to be decided, and
//     then finds p among the directories of its file (clash.go).
//
// So of a file and a file below it in another partition, whichever commits
// second sees the first. A model that claimed A is seen by a later put in A
// through A's head and tail; one whose claim object is created after that
// put read A's tail takes A's position before or after the put's own
// object, and either way the second reads the first. A put whose partition
// names no model below it (every data file of a model without deeper
// models, the hot path) and a commit of a model that already claimed its
// ancestors read and write nothing more than before: the claims are read
// from the tails the clash checks read anyway. A model's first commit costs
// a staged commit (its record, the claim object, the flip).
//
// A guard of a model whose log is empty (never written, or dropped) is
// not made: that model's next commit claims again, and is ordered by A's
// log. Dropping the partition A forgets the claims in it: each model
// claims it again at its next commit.

// partReq is what a staged commit asks of one of its partitions besides
// its entries: the models its object claims the partition for, the paths
// that must not be live files there (each the directory of a put of the
// claiming model, mapped to that put), and the paths below which no file
// of it may be live (the commit's puts it guards).
type partReq struct {
	claims  []string
	notLive map[string]string
	below   []string
	// skipped: the guard was not made (the partition's log is empty).
	skipped bool
}

// crossParts are a staged commit's partReqs, by partition.
type crossParts map[string]*partReq

func (c crossParts) at(part string) *partReq {
	if c[part] == nil {
		c[part] = &partReq{notLive: map[string]string{}}
	}
	return c[part]
}

// coveredFor returns the directories that the claims c makes for part
// check as they are created (checkReq): a live file at one of them
// refuses the claim, and with it the commit, so part's own clash check
// need not read them (before the flip nothing of the commit is seen; a
// file put there after the claim's create waits for the commit or meets
// the claim).
func (c crossParts) coveredFor(part string) map[string]bool {
	var out map[string]bool
	for _, r := range c {
		if !slices.Contains(r.claims, part) {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		for dir := range r.notLive {
			out[dir] = true
		}
	}
	return out
}

// without returns c without part's request.
func (c crossParts) without(part string) crossParts {
	out := maps.Clone(c)
	delete(out, part)
	return out
}

// merge adds o's requests to c.
func (c crossParts) merge(o crossParts) {
	for part, r := range o {
		w := c.at(part)
		w.claims = addSubs(w.claims, r.claims)
		maps.Copy(w.notLive, r.notLive)
		w.below = addSubs(w.below, r.below)
	}
}

// errNeedParts asks Commit to make the commit again, staged, with these
// requests of other partitions (a claim or a guard it did not carry).
type errNeedParts struct {
	parts crossParts
	// tails are the tails the commit of one object read before it found
	// it needs parts (its partition's own, created if it registered it,
	// and those its clash checks read), for the staged commit's first
	// attempt (commitWhole's pre): read again, they cost a GET and a LIST
	// each, and a head the first registered would no longer count as
	// created by the commit (cursorover.go).
	tails map[string]*tail
}

func (e *errNeedParts) Error() string {
	return fmt.Sprintf("lake: the commit needs claims or guards in %d other partitions", len(e.parts))
}

// addSubs returns subs with add's names it lacks, sorted.
func addSubs(subs, add []string) []string {
	out := slices.Clone(subs)
	for _, a := range add {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// subsOf returns the models that claimed a partition, by its tail: the
// head's Subs and the claims of the decided log objects after it.
func (d *Driver) subsOf(ctx context.Context, t *tail) ([]string, error) {
	subs := slices.Clone(t.h.Subs)
	err := d.eachCounted(ctx, t, func(o *logObject) error {
		subs = addSubs(subs, o.Claims)
		return nil
	})
	return subs, err
}

// emptyLog reports whether t's partition has no log: never written, or
// dropped.
func emptyLog(t *tail) bool { return !t.exists || (t.last == nil && t.h.Applied == 0) }

// crossNeeds returns the claims and guards a commit of puts to part (the
// puts of new files: a put over a live file needs neither, since while it
// is live no file can be put above or below it; t: part's tail; tails:
// other partitions' tails read by its clash checks) needs and cx (the
// staged commit's requests, nil for a commit of one object) does not
// carry, as *errNeedParts, or nil.
func (d *Driver) crossNeeds(ctx context.Context, t *tail, part string, puts []string, tails map[string]*tail, cx crossParts) error {
	if len(puts) == 0 {
		return nil
	}
	need := crossParts{}
	// Claims of part in its ancestor partitions.
	for _, a := range d.layout.ClaimParts(part) {
		if r := cx[a]; r != nil && slices.Contains(r.claims, part) {
			continue // this commit claims it
		}
		ta := tails[a]
		if ta == nil {
			var err error
			if ta, err = d.readTail(ctx, a, false); err != nil {
				return err
			}
			tails[a] = ta
		}
		subs, err := d.subsOf(ctx, ta)
		if err != nil {
			return err
		}
		if slices.Contains(subs, part) && !emptyLog(t) {
			continue
		}
		w := need.at(a)
		w.claims = addSubs(w.claims, []string{part})
		for _, p := range puts {
			for _, anc := range datastore.Ancestors(p) {
				if d.partition(anc) == a {
					w.notLive[anc] = p
				}
			}
		}
	}
	// Guards of the models that claimed part and can hold files below
	// its puts.
	subs, err := d.subsOf(ctx, t)
	if err != nil {
		return err
	}
	for _, x := range subs {
		if x == part {
			continue
		}
		root := datastore.ModelPrefix + x + "/"
		for _, p := range puts {
			if !strings.HasPrefix(root, p+"/") && !strings.HasPrefix(p, root) {
				continue
			}
			if r := cx[x]; r != nil && slices.Contains(r.below, p) {
				if !r.skipped {
					continue
				}
				// Not made, X's log being empty then: still empty,
				// X's next commit claims part and is ordered by
				// part's log; written since, guard it after all.
				tx, err := d.readTail(ctx, x, false)
				if err != nil {
					return err
				}
				if emptyLog(tx) {
					continue
				}
			}
			w := need.at(x)
			w.below = addSubs(w.below, []string{p})
		}
	}
	if len(need) == 0 {
		return nil
	}
	return &errNeedParts{parts: need}
}

// checkReq checks what a staged commit asks of part (req) against part's
// tail t and the index: no path of req.notLive is a live file, and no live
// file lies below a path of req.below; a failure is the Clash of the put
// that asked.
func (d *Driver) checkReq(ctx context.Context, t *tail, part string, req *partReq) error {
	if req == nil {
		return nil
	}
	if len(req.notLive) > 0 {
		paths := slices.Sorted(maps.Keys(req.notLive))
		cur, err := d.statTail(ctx, t, paths)
		if err != nil {
			return err
		}
		for _, a := range paths {
			if c, ok := cur[a]; ok && !c.Deleted {
				return datastore.Clash(req.notLive[a], a)
			}
		}
	}
	if len(req.below) == 0 {
		return nil
	}
	tailLive, err := d.tailLive(ctx, t, part)
	if err != nil {
		return err
	}
	for _, p := range req.below {
		for q, live := range tailLive {
			if live && strings.HasPrefix(q, p+"/") {
				return datastore.Clash(p, q)
			}
		}
		skip := func(q string) bool { _, inTail := tailLive[q]; return inTail }
		var below string
		if t.exists && t.h.Indexed {
			below, err = d.liveHeadBelow(part, t.h, p+"/", skip)
		} else {
			below, err = d.liveIndexBelow(ctx, p+"/", skip)
		}
		if err != nil {
			return err
		}
		if below != "" {
			return datastore.Clash(p, below)
		}
	}
	return nil
}

// neededParts adds to cx the claims and guards a staged commit of entries
// (order: its partitions, byPart: the entries of each) needs, read from
// the tails of its partitions and of their ancestors before anything is
// staged: a part that found one missing only once it was staged would
// abort the commit, and the positions its earlier parts took would stay
// taken (an aborted object holds its positions). A claim or guard needed
// because of a commit landing after this read is still found by the part
// that needs it, and the commit is made again (commitWhole).
//
// It returns the tails it read, which the first attempt starts from: the
// partitions' own are read as a writer reads them (withLast), so reading
// them here costs the commit nothing more; a tail this process's Stat
// handed off is taken instead of a read (issue 31).
func (d *Driver) neededParts(ctx context.Context, entries []datastore.Entry, order []string, byPart map[string][]int, cx crossParts) (map[string]*tail, error) {
	tails := map[string]*tail{}
	for _, part := range order {
		var sub []datastore.Entry
		for _, i := range byPart[part] {
			sub = append(sub, entries[i])
		}
		var puts []string
		for _, e := range sub {
			if e.Put != nil {
				puts = append(puts, e.Put.Path) // new files or not: a claim too many costs only requests
			}
		}
		t := tails[part]
		if t == nil {
			// The tail this process's Stat read a moment ago, as a
			// single commit takes it (handoff.go): each part's create
			// is conditional on the position it names, so a tail that
			// moved since costs a lost race and a fresh read.
			var err error
			if t, err = d.takeHandoff(ctx, part); err != nil {
				return nil, err
			}
		}
		if t == nil || !t.withLast {
			var err error
			if t, err = d.readTail(ctx, part, true); err != nil {
				return nil, err
			}
		}
		tails[part] = t
		err := d.crossNeeds(ctx, t, part, puts, tails, cx)
		var need *errNeedParts
		if errors.As(err, &need) {
			cx.merge(need.parts)
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return tails, nil
}

// forgetClaims removes dropped model x from the Subs of its ancestor
// partitions' heads, once its drop removed its head: without it a head's
// Subs would grow with every model ever made (a seed's disposable models
// make thousands an hour), and every commit that reads that head would
// read it all. It is best effort, one conditional replace a head: a claim
// left behind costs a name until the model's next drop, never a wrong
// answer (a model whose log is empty claims again at its next commit,
// whatever Subs says). A claim x made since its drop is kept: it is in
// the head's tail (rolled forward again later) or, rolled forward, came
// with x's head, which the staged commit registered before it flipped.
func (d *Driver) forgetClaims(ctx context.Context, x string) {
	hosts := d.claimHosts(ctx, x, false)
	if len(hosts) == 0 {
		return
	}
	// x's head read after the hosts' (once for all): a claim rolled into
	// a host read above came with a head of x made before it.
	if _, _, again, err := d.readHead(ctx, x); err != nil || again {
		return
	}
	d.forgetIn(ctx, x, hosts)
}

// heldClaim is an ancestor partition's head that names a model among its
// claims, as read (or offered: known), with its ETag.
type heldClaim struct {
	part, etag string
	h          head
	known      bool
}

// claimHosts returns the heads of x's ancestor partitions that name x
// among their claims. With offered, a head this process read or wrote a
// moment ago (handoff.go: a model's first commit hands on the claims host
// "data" it rolled its claim into, and the pull reads it whenever another
// commit or drop moved it) is taken instead of a read when it names x: its
// replace is conditional on the ETag it was read with, and forgetOffered
// reads again where that no longer holds. One that does not name x may be
// older than x's claim, and is read again: a claim left behind would stay
// for good, x being gone.
func (d *Driver) claimHosts(ctx context.Context, x string, offered bool) []heldClaim {
	var hosts []heldClaim
	for _, a := range d.layout.ClaimParts(x) {
		if offered {
			if t, ok := d.c.handoff.Get(d.prefix + a); ok && t != nil && t.exists && t.hetag != "" && slices.Contains(t.h.Subs, x) {
				hosts = append(hosts, heldClaim{a, t.hetag, t.h, true})
				continue
			}
		}
		h, etag, ok, err := d.readHead(ctx, a)
		if err == nil && ok && slices.Contains(h.Subs, x) {
			hosts = append(hosts, heldClaim{a, etag, h, false})
		}
	}
	return hosts
}

// forgetIn removes x from the Subs of hosts, read before x's head was read
// absent; it reports whether a host taken as offered had moved since
// (its replace refused), which then still names x.
func (d *Driver) forgetIn(ctx context.Context, x string, hosts []heldClaim) (stale bool) {
	for _, n := range hosts {
		n.h.Subs = slices.DeleteFunc(slices.Clone(n.h.Subs), func(s string) bool { return s == x })
		if _, err := d.replaceHead(ctx, n.part, n.etag, n.h); err != nil && n.known && errors.Is(err, metastore.ErrConflict) {
			stale = true
		}
	}
	return stale
}

// forgetOffered is forgetClaims after a drop pass that read the hosts
// (claimHosts with offered) before it read x's head absent: no read of x's
// head again. A host offered that moved since is read again, with x's
// head after it, as forgetClaims reads them.
func (d *Driver) forgetOffered(ctx context.Context, x string, hosts []heldClaim) {
	if len(hosts) > 0 && d.forgetIn(ctx, x, hosts) {
		d.forgetClaims(ctx, x)
	}
}
