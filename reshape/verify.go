package reshape

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/sweep"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	Segments int
	PageSize int
	// ObsoleteBefore, when set, is the obsolescence cutoff of a lazy-only
	// backfill: a missing item whose Spec.Timestamp is older is counted as
	// obsolete (by design never converted), apart, and does not make
	// coverage incomplete.
	ObsoleteBefore time.Time
	// Sample is how many new partition key values to check in the index
	// (DefaultSample).
	Sample int
	// IndexRetries is how often a sampled key whose index answer differs
	// from the table is queried again, allowing for the index's eventual
	// consistency (DefaultIndexRetries); RetryDelay is the first wait,
	// doubled each time (DefaultRetryDelay).
	IndexRetries int
	RetryDelay   time.Duration
	// List is how many missing, stale and not-derivable items the report
	// names (DefaultList); the counts are always complete.
	List     int
	Progress func(sweep.Progress)
}

// Verify defaults.
const (
	DefaultSample       = 20
	DefaultIndexRetries = 5
	DefaultRetryDelay   = 200 * time.Millisecond
	DefaultList         = 100
	// maxSampleItems bounds the items remembered per sampled key.
	maxSampleItems = 10000
)

// ErrIncomplete is the error of a verify that did not find full coverage. It
// matches metastore.ErrRefused: the old read path may not be retired yet.
var ErrIncomplete = fmt.Errorf("%w: reshape: coverage is incomplete", metastore.ErrRefused)

// Counts are the items of one segment (or of the table) by state.
type Counts struct {
	Scanned      int64 `json:"scanned"`
	Covered      int64 `json:"covered"`
	Converted    int64 `json:"converted"`
	Missing      int64 `json:"missing"`
	Stale        int64 `json:"stale"`
	NotDerivable int64 `json:"notDerivable"`
	// Foreign items hold a derived attribute of their own (of another
	// type than the derived one): never overwritten, never in the index.
	Foreign int64 `json:"foreign,omitempty"`
	// Obsolete are missing items older than the cutoff, not counted in
	// Missing.
	Obsolete int64 `json:"obsolete"`
}

func (c *Counts) add(o Counts) {
	c.Scanned += o.Scanned
	c.Covered += o.Covered
	c.Converted += o.Converted
	c.Missing += o.Missing
	c.Stale += o.Stale
	c.NotDerivable += o.NotDerivable
	c.Foreign += o.Foreign
	c.Obsolete += o.Obsolete
}

// SegmentReport is one scan segment's coverage.
type SegmentReport struct {
	Segment int `json:"segment"`
	Counts
	// Digest is the XOR of SHA-256(key, state, derived values) over the
	// segment's covered items: order-independent, so the digest of the
	// table (the XOR of the segments') is the same for any segment count
	// and changes when any covered item's state or derived value does.
	Digest string `json:"digest"`

	digest [sha256.Size]byte
}

// ItemRef names one item in a report.
type ItemRef struct {
	Key    string `json:"key"`
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
}

// IndexCheck is the comparison of the index with the table for a sample of
// new partition key values.
type IndexCheck struct {
	Checked    int             `json:"checked"`
	Matched    int             `json:"matched"`
	Retries    int             `json:"retries"`
	Mismatches []IndexMismatch `json:"mismatches,omitempty"`
	// Unsettled counts sampled keys whose items kept changing under the
	// check (a live writer moving them): not judged, not a fault.
	Unsettled int `json:"unsettled,omitempty"`
	// Skipped says why no check was made (the index does not exist).
	Skipped string `json:"skipped,omitempty"`
}

// IndexMismatch is a sampled key whose index answer kept differing from the
// table after the retries.
type IndexMismatch struct {
	Value   string   `json:"value"`
	Missing []string `json:"missingFromIndex,omitempty"`
	Extra   []string `json:"extraInIndex,omitempty"`
}

// VerifyReport is the end condition of a reshape: written as a file by the
// CLI, and Complete only at full coverage.
type VerifyReport struct {
	Table          string          `json:"table"`
	Index          string          `json:"index"`
	Started        time.Time       `json:"started"`
	Finished       time.Time       `json:"finished"`
	ObsoleteBefore *time.Time      `json:"obsoleteBefore,omitempty"`
	Segments       []SegmentReport `json:"segments"`
	Total          Counts          `json:"total"`
	Digest         string          `json:"digest"`
	Missing        []ItemRef       `json:"missingItems,omitempty"`
	Stale          []ItemRef       `json:"staleItems,omitempty"`
	NotDerivable   []ItemRef       `json:"notDerivableItems,omitempty"`
	Foreign        []ItemRef       `json:"foreignItems,omitempty"`
	Obsolete       []ItemRef       `json:"obsoleteItems,omitempty"`
	IndexCheck     IndexCheck      `json:"indexCheck"`
	// ReadUnits is the read capacity the table scan used (the index check
	// not included).
	ReadUnits float64 `json:"readUnits"`
	Complete  bool    `json:"complete"`
	// Reasons say why coverage is incomplete.
	Reasons []string `json:"reasons,omitempty"`
}

// Err is nil at full coverage, else ErrIncomplete with the reasons.
func (v *VerifyReport) Err() error {
	if v.Complete {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrIncomplete, strings.Join(v.Reasons, "; "))
}

// Verify paginates the whole live table (strongly consistent) and reports
// coverage per segment: covered, converted, missing, stale, not derivable,
// obsolete (with ObsoleteBefore), counts and a digest, naming the items
// missing or stale. It then queries the index for a sample of new partition
// key values and checks that it returns exactly the items the table holds
// under each, retrying a bounded number of times because a GSI is eventually
// consistent even once ACTIVE, and re-reading the items that differ so that
// a live writer's change is not taken for an index fault. Coverage is
// complete when nothing is missing, stale or not derivable, and the index
// exists and agrees with the table.
func (r *Reshaper) Verify(ctx context.Context, opts VerifyOptions) (*VerifyReport, error) {
	if opts.Sample <= 0 {
		opts.Sample = DefaultSample
	}
	if opts.IndexRetries < 0 {
		opts.IndexRetries = 0
	} else if opts.IndexRetries == 0 {
		opts.IndexRetries = DefaultIndexRetries
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	if opts.List <= 0 {
		opts.List = DefaultList
	}
	if err := r.refresh(ctx); err != nil {
		return nil, err
	}
	rep := &VerifyReport{Table: r.spec.Table, Index: r.spec.Index.Name, Started: time.Now().UTC()}
	if !opts.ObsoleteBefore.IsZero() {
		t := opts.ObsoleteBefore.UTC()
		rep.ObsoleteBefore = &t
	}
	var (
		mu     sync.Mutex
		segs   = map[int]*SegmentReport{}
		sample = newSampler(opts.Sample)
	)
	sum, err := sweep.Run(ctx, r.api, sweep.Options{
		Table: r.spec.Table, Segments: opts.Segments, PageSize: opts.PageSize, ConsistentRead: true, DryRun: true, Progress: opts.Progress,
	}, func(_ context.Context, p *sweep.Page) error {
		mu.Lock()
		defer mu.Unlock()
		sr := segs[p.Segment]
		if sr == nil {
			sr = &SegmentReport{Segment: p.Segment}
			segs[p.Segment] = sr
		}
		sr.Scanned += int64(p.Scanned)
		for _, item := range p.Items {
			r.verifyItem(item, sr, rep, opts)
			sample.offer(r, item)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.ReadUnits = sum.ReadUnits
	var total [sha256.Size]byte
	for seg := range sum.Segments {
		sr := segs[seg]
		if sr == nil {
			sr = &SegmentReport{Segment: seg}
		}
		sr.Digest = hex.EncodeToString(sr.digest[:])
		for i := range total {
			total[i] ^= sr.digest[i]
		}
		rep.Total.add(sr.Counts)
		rep.Segments = append(rep.Segments, *sr)
	}
	rep.Digest = hex.EncodeToString(total[:])
	if err := r.checkIndex(ctx, sample, opts, &rep.IndexCheck); err != nil {
		return nil, err
	}
	rep.Finished = time.Now().UTC()
	if n := rep.Total.Missing; n > 0 {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%d items missing the new attributes (run apply)", n))
	}
	if n := rep.Total.Stale; n > 0 {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%d items with stale derived values (run apply)", n))
	}
	if n := rep.Total.NotDerivable; n > 0 {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%d covered items cannot be derived and will never be in the index (fix them or narrow covers)", n))
	}
	if n := rep.Total.Foreign; n > 0 {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%d covered items hold a derived attribute of their own, of another type: they are never in the index (narrow covers, or derive another attribute)", n))
	}
	if rep.IndexCheck.Skipped != "" {
		rep.Reasons = append(rep.Reasons, rep.IndexCheck.Skipped)
	}
	if n := len(rep.IndexCheck.Mismatches); n > 0 {
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("the index disagrees with the table for %d sampled keys after %d retries", n, opts.IndexRetries))
	}
	rep.Complete = len(rep.Reasons) == 0
	return rep, nil
}

// verifyItem classifies one item into its segment's report.
func (r *Reshaper) verifyItem(item map[string]types.AttributeValue, sr *SegmentReport, rep *VerifyReport, opts VerifyOptions) {
	v := r.spec.Classify(item)
	if v.State == NotCovered {
		return
	}
	sr.Covered++
	key := KeyString(r.tab().key(item))
	ref := ItemRef{Key: key, State: v.State.String()}
	list := func(l *[]ItemRef) {
		if len(*l) < opts.List {
			*l = append(*l, ref)
		}
	}
	switch v.State {
	case Converted:
		sr.Converted++
	case Missing:
		if r.obsolete(item, opts.ObsoleteBefore) {
			sr.Obsolete++
			ref.State = "obsolete"
			list(&rep.Obsolete)
		} else {
			sr.Missing++
			list(&rep.Missing)
		}
	case Stale:
		sr.Stale++
		var diffs []string
		for _, d := range r.spec.derived {
			if !sameScalar(item[d], v.Want[d]) {
				diffs = append(diffs, fmt.Sprintf("%s is %q, derives %q", d, scalarText(item[d]), scalarText(v.Want[d])))
			}
		}
		ref.Detail = strings.Join(diffs, ", ")
		list(&rep.Stale)
	case NotDerivable:
		sr.NotDerivable++
		ref.Detail = v.Reason
		list(&rep.NotDerivable)
	case Foreign:
		sr.Foreign++
		ref.Detail = v.Reason
		list(&rep.Foreign)
	}
	h := sha256.New()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(ref.State))
	for _, d := range r.spec.derived {
		h.Write([]byte{0})
		h.Write([]byte(d + "=" + scalarText(item[d])))
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	for i := range sr.digest {
		sr.digest[i] ^= sum[i]
	}
}

// obsolete says item's timestamp is before cutoff.
func (r *Reshaper) obsolete(item map[string]types.AttributeValue, cutoff time.Time) bool {
	if cutoff.IsZero() || r.spec.Timestamp == "" {
		return false
	}
	t, ok := ParseTimestamp(item[r.spec.Timestamp])
	return ok && t.Before(cutoff)
}

// ParseTimestamp reads an item's age: an RFC 3339 time or a date
// (2006-01-02, a longer string starting with one also counts) as a string,
// or Unix seconds as a number.
func ParseTimestamp(v types.AttributeValue) (time.Time, bool) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if t, err := time.Parse(time.RFC3339Nano, v.Value); err == nil {
			return t, true
		}
		if len(v.Value) >= 10 {
			if t, err := time.Parse(time.DateOnly, v.Value[:10]); err == nil {
				return t, true
			}
		}
	case *types.AttributeValueMemberN:
		if f, err := strconv.ParseFloat(v.Value, 64); err == nil {
			return time.Unix(int64(f), 0), true
		}
	}
	return time.Time{}, false
}

// sampler keeps the items of the k new partition key values with the
// smallest hashes (a bottom-k sample: the same keys for the same table
// whatever the scan order), by what the items hold, not what they derive:
// the index indexes what is stored.
type sampler struct {
	k     int
	byVal map[string]*sampled
}

type sampled struct {
	hash  uint64
	value types.AttributeValue
	keys  map[string]map[string]types.AttributeValue // KeyString → key
	full  bool                                       // more than maxSampleItems: not checked
}

func newSampler(k int) *sampler { return &sampler{k: k, byVal: map[string]*sampled{}} }

func (s *sampler) offer(r *Reshaper, item map[string]types.AttributeValue) {
	v, ok := r.indexValue(item)
	if !ok {
		return
	}
	text := scalarText(v)
	if e := s.byVal[text]; e != nil {
		if len(e.keys) >= maxSampleItems {
			e.full = true
			return
		}
		k := r.tab().key(item)
		e.keys[KeyString(k)] = k
		return
	}
	h := fnv.New64a()
	h.Write([]byte(text))
	hv := h.Sum64()
	if len(s.byVal) >= s.k {
		// Evict the largest hash if this one is smaller.
		var worst string
		var worstH uint64
		for t, e := range s.byVal {
			if e.hash >= worstH {
				worst, worstH = t, e.hash
			}
		}
		if hv >= worstH {
			return
		}
		delete(s.byVal, worst)
	}
	k := r.tab().key(item)
	s.byVal[text] = &sampled{hash: hv, value: v, keys: map[string]map[string]types.AttributeValue{KeyString(k): k}}
}

// indexValue returns the index partition key an item is stored under, if
// the item is in the index at all (it holds every index key attribute with
// the index's type).
func (r *Reshaper) indexValue(item map[string]types.AttributeValue) (types.AttributeValue, bool) {
	for _, k := range r.spec.indexKeys() {
		v, ok := item[k.Attribute]
		if !ok || typeName(v) != k.Type {
			return nil, false
		}
	}
	return item[r.spec.Index.PartitionKey.Attribute], true
}

func (s *sampler) values() []*sampled {
	out := make([]*sampled, 0, len(s.byVal))
	for _, e := range s.byVal {
		if !e.full {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hash < out[j].hash })
	return out
}
