package sweep

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Client is the part of the DynamoDB API a sweep uses, so that a
// fault-injecting client can sit in between.
type Client interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Defaults.
const (
	DefaultSegments = 8
	DefaultPageSize = 100
	// MaxSegments bounds Options.Segments (DynamoDB allows up to 1,000,000;
	// beyond a few hundred a sweep only multiplies its requests).
	MaxSegments = 1024
	// MaxPageSize bounds Options.PageSize.
	MaxPageSize = 10000
)

// Options configure a sweep. The zero value of each field means its default.
type Options struct {
	// Table is the table to scan (required).
	Table string
	// Segments is the number of parallel scan segments of a new sweep
	// (DefaultSegments). A resumed sweep uses the count it recorded.
	Segments int
	// PageSize is the Limit of each Scan request: the items it evaluates
	// (DefaultPageSize).
	PageSize int
	// ConsistentRead makes every Scan strongly consistent.
	ConsistentRead bool
	// MaxWCU bounds the write capacity units per second that handlers
	// report through Page.Spend; 0 means no bound.
	MaxWCU float64
	// DryRun scans and calls the handler with Page.DryRun set, and saves
	// no cursor.
	DryRun bool
	// Checkpoints keeps the durable cursors; nil means the sweep starts
	// from the beginning and remembers nothing.
	Checkpoints Checkpoints
	// Customize, when set, may add a projection or a filter to each Scan
	// request (it MUST NOT touch Limit, Segment, TotalSegments or
	// ExclusiveStartKey).
	Customize func(*dynamodb.ScanInput)
	// Progress, when set, is called after each page with the totals so
	// far. Calls may come from several goroutines, one at a time.
	Progress func(Progress)
}

func (o Options) withDefaults() (Options, error) {
	if o.Table == "" {
		return o, errors.New("lake: sweep: no table")
	}
	if o.Segments == 0 {
		o.Segments = DefaultSegments
	}
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Segments < 1 || o.Segments > MaxSegments {
		return o, fmt.Errorf("lake: sweep: segments must be 1 to %d, got %d", MaxSegments, o.Segments)
	}
	if o.PageSize < 1 || o.PageSize > MaxPageSize {
		return o, fmt.Errorf("lake: sweep: page size must be 1 to %d, got %d", MaxPageSize, o.PageSize)
	}
	if o.MaxWCU < 0 {
		return o, fmt.Errorf("lake: sweep: max WCU must not be negative, got %v", o.MaxWCU)
	}
	return o, nil
}

// Page is one Scan page handed to the handler.
type Page struct {
	// Segment is the scan segment the page belongs to.
	Segment int
	// Items are the items the Scan returned (after any filter).
	Items []map[string]types.AttributeValue
	// Scanned is the number of items DynamoDB evaluated (ScannedCount).
	Scanned int
	// DryRun says the handler MUST NOT write.
	DryRun bool

	run *run
}

// Spend reports units write capacity units that the handler is about to
// spend (or, with a negative value, gives back an overestimate), and waits
// while the sweep is over its MaxWCU budget. It returns ctx's error if ctx
// ends first.
func (p *Page) Spend(ctx context.Context, units float64) error {
	p.run.spent.add(units)
	return p.run.limit.wait(ctx, units)
}

// Count adds n to the named counter of the sweep's Summary (for example
// "created" or "repaired").
func (p *Page) Count(name string, n int64) {
	p.run.mu.Lock()
	p.run.counts[name] += n
	p.run.mu.Unlock()
}

// Handler processes one page. It is called concurrently for different
// segments, never concurrently for one segment. An error stops the sweep;
// the page's cursor is not saved, so a rerun hands the page again.
type Handler func(ctx context.Context, p *Page) error

// Progress is the running total of a sweep.
type Progress struct {
	Segments     int
	SegmentsDone int
	Pages        int64
	Scanned      int64
	Items        int64
	WriteUnits   float64
	ReadUnits    float64
	Elapsed      time.Duration
	Counts       map[string]int64
}

// ItemsPerSecond is the rate of items scanned since the sweep (this run of
// it) started.
func (p Progress) ItemsPerSecond() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Scanned) / p.Elapsed.Seconds()
}

// Summary is what a sweep did in this run.
type Summary struct {
	Progress
	// Resumed says the sweep continued from saved cursors.
	Resumed bool
	// Complete says every segment reached the end of the table (in a dry
	// run: in this run).
	Complete bool
	// Requests is the number of Scan requests made.
	Requests int64
}

type run struct {
	opts    Options
	client  Client
	handler Handler
	limit   *limiter
	start   time.Time

	pages, scanned, items, requests, segsDone atomic.Int64
	spent, read                               floatCounter

	mu       sync.Mutex // guards counts and serialises Progress calls
	counts   map[string]int64
	segments int
}

// Run sweeps the table: it loads (or records) the segment cursors, scans every
// unfinished segment in parallel, hands each page to h, and saves each
// segment's cursor after h returned for its page. It returns when every
// segment is done, or at the first error (of a Scan, of h, of a save, or
// ctx's), with the summary of what this run did.
func Run(ctx context.Context, client Client, opts Options, h Handler) (Summary, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Summary{}, err
	}
	r := &run{opts: opts, client: client, handler: h, limit: newLimiter(opts.MaxWCU, time.Now), start: time.Now(), counts: map[string]int64{}}
	state, resumed, err := r.loadState(ctx)
	if err != nil {
		return Summary{}, err
	}
	r.segments = state.Segments
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for seg, c := range state.Cursors {
		if c.Done {
			r.segsDone.Add(1)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.segment(ctx, seg, c); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	sum := Summary{Progress: r.progress(), Resumed: resumed, Requests: r.requests.Load()}
	sum.Complete = sum.SegmentsDone == sum.Segments
	if err := context.Cause(ctx); err != nil {
		return sum, err
	}
	return sum, nil
}

func (r *run) loadState(ctx context.Context) (State, bool, error) {
	fresh := State{Segments: r.opts.Segments, Cursors: make([]Cursor, r.opts.Segments)}
	cp := r.opts.Checkpoints
	if cp == nil {
		return fresh, false, nil
	}
	st, err := cp.Load(ctx)
	if err != nil {
		return State{}, false, err
	}
	if st != nil {
		if err := st.validate(); err != nil {
			return State{}, false, err
		}
		return *st, true, nil
	}
	if r.opts.DryRun {
		return fresh, false, nil
	}
	if err := cp.Init(ctx, r.opts.Segments); err != nil {
		return State{}, false, err
	}
	return fresh, false, nil
}

type scanResult struct {
	out *dynamodb.ScanOutput
	err error
}

// segment walks one segment from cursor c to its end.
func (r *run) segment(ctx context.Context, seg int, c Cursor) error {
	pending := r.scan(ctx, seg, c.Key)
	for {
		res := <-pending
		if res.err != nil {
			return res.err
		}
		last := res.out.LastEvaluatedKey
		if len(last) > 0 {
			// Scan the next page while this one's writes run.
			pending = r.scan(ctx, seg, last)
		}
		p := &Page{Segment: seg, Items: res.out.Items, Scanned: int(res.out.ScannedCount), DryRun: r.opts.DryRun, run: r}
		if err := r.handler(ctx, p); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		done := len(last) == 0
		if r.opts.Checkpoints != nil && !r.opts.DryRun {
			if err := r.opts.Checkpoints.Save(ctx, seg, Cursor{Key: last, Done: done}); err != nil {
				return err
			}
		}
		r.pages.Add(1)
		r.scanned.Add(int64(p.Scanned))
		r.items.Add(int64(len(p.Items)))
		if done {
			r.segsDone.Add(1)
		}
		r.report()
		if done {
			return nil
		}
	}
}

// scan starts the Scan of one page and returns where its result will arrive.
func (r *run) scan(ctx context.Context, seg int, start map[string]types.AttributeValue) <-chan scanResult {
	ch := make(chan scanResult, 1)
	in := &dynamodb.ScanInput{
		TableName:              aws.String(r.opts.Table),
		Limit:                  aws.Int32(int32(r.opts.PageSize)),
		ConsistentRead:         aws.Bool(r.opts.ConsistentRead),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	if r.opts.Customize != nil {
		r.opts.Customize(in)
	}
	in.Limit = aws.Int32(int32(r.opts.PageSize))
	in.ExclusiveStartKey = start
	if r.segments > 1 {
		in.Segment, in.TotalSegments = aws.Int32(int32(seg)), aws.Int32(int32(r.segments))
	} else {
		in.Segment, in.TotalSegments = nil, nil
	}
	go func() {
		out, err := r.client.Scan(ctx, in)
		r.requests.Add(1)
		if err != nil {
			ch <- scanResult{err: fmt.Errorf("lake: sweep: scan %s segment %d: %w", r.opts.Table, seg, err)}
			return
		}
		if out.ConsumedCapacity != nil && out.ConsumedCapacity.CapacityUnits != nil {
			r.read.add(*out.ConsumedCapacity.CapacityUnits)
		}
		ch <- scanResult{out: out}
	}()
	return ch
}

func (r *run) progress() Progress {
	r.mu.Lock()
	counts := make(map[string]int64, len(r.counts))
	for k, v := range r.counts {
		counts[k] = v
	}
	r.mu.Unlock()
	return Progress{
		Segments:     r.segments,
		SegmentsDone: int(r.segsDone.Load()),
		Pages:        r.pages.Load(),
		Scanned:      r.scanned.Load(),
		Items:        r.items.Load(),
		WriteUnits:   r.spent.load(),
		ReadUnits:    r.read.load(),
		Elapsed:      time.Since(r.start),
		Counts:       counts,
	}
}

func (r *run) report() {
	if r.opts.Progress == nil {
		return
	}
	p := r.progress()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts.Progress(p)
}
