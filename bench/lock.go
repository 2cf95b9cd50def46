package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/lock"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
)

// LockConfig shapes RunLock.
type LockConfig struct {
	// Table names the tables the benchmark creates: the lake table (in
	// Layout) and Table_raw for the raw SDK's PutItem. They must not exist
	// and are deleted at the end unless Keep is set.
	Table  string
	Layout dynamostore.Layout
	// Ops is the number of uncontended acquire/release pairs (and raw
	// PutItems), interleaved.
	Ops int
	// Lease is the lease of the takeover runs; Skew the clock-skew bound
	// of the skew-bounded waiter; Runs the takeovers per mode.
	Lease, Skew time.Duration
	Runs        int
	// Workers and Duration shape the throughput runs.
	Workers  int
	Duration time.Duration
	// Holder starts a process that holds the lock name with lease until it
	// is killed (lake lock run NAME --lease D -- sleep …); it is killed with
	// SIGKILL, process group and all.
	Holder func(name string, lease time.Duration) *exec.Cmd
	Keep   bool
}

// LockCost is the cost of one kind of uncontended operation.
type LockCost struct {
	Op         string
	Requests   float64 // per operation
	WriteUnits float64 // per operation
	P50, P99   time.Duration
}

// TakeoverRun is one takeover of a killed holder.
type TakeoverRun struct {
	Mode string
	// Late is set when the waiter arrived a lease after the kill (a
	// restarted process), not at the kill.
	Late bool
	// FromArrival is from the waiter's first attempt to it holding the lock.
	FromArrival time.Duration
	// FromKill is from the kill to the waiter holding the lock; FromExpiry
	// from the holder's last recorded expiry.
	FromKill, FromExpiry time.Duration
}

// Throughput is one throughput run.
type Throughput struct {
	Locks        int
	Workers      int
	Acquisitions int
	Wall         time.Duration
	P50, P99     time.Duration // acquisition latency, waits included
}

// LockResult holds the figures of RunLock.
type LockResult struct {
	Config     LockConfig
	Cold       LockCost // the first acquisition by a Locker that has not seen the lock
	Costs      []LockCost
	Takeovers  []TakeoverRun
	Throughput []Throughput
}

// RunLock measures lake's lock on DynamoDB: uncontended acquire and release
// against one conditional PutItem made with the raw SDK, in the same run;
// the takeover of a killed holder with a clock-skew bound and by observing
// a full lease; and the throughput of workers on one lock against workers
// on one namespaced lock each.
func RunLock(ctx context.Context, api ddb.API, cfg LockConfig, progress io.Writer) (LockResult, error) {
	res := LockResult{Config: cfg}
	if cfg.Ops < 1 || cfg.Runs < 1 || cfg.Workers < 1 || cfg.Duration <= 0 || cfg.Lease < lock.MinLease || cfg.Skew <= 0 || cfg.Holder == nil {
		return res, fmt.Errorf("%w: need ops, runs and workers ≥ 1, a positive duration and skew, a lease ≥ %v and a holder command", metastore.ErrInvalidArgument, lock.MinLease)
	}
	raw := cfg.Table + "_raw"
	if !cfg.Keep {
		defer func() {
			for _, name := range []string{cfg.Table, cfg.Table + dynamostore.V2Suffix, raw} {
				api.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
			}
		}()
	}
	opts := dynamostore.Options{Table: cfg.Table, Layout: cfg.Layout}
	if err := dynamostore.Create(ctx, api, opts); err != nil {
		return res, err
	}
	if err := createRawTable(ctx, api, raw); err != nil {
		return res, err
	}
	d, err := dynamostore.Open(ctx, api, opts)
	if err != nil {
		return res, err
	}
	s := metastore.New(d)
	defer s.Close()

	fmt.Fprintf(progress, "uncontended: %d acquire/release pairs and raw PutItems, interleaved\n", cfg.Ops)
	if err := uncontended(ctx, api, raw, d, s, cfg.Ops, &res); err != nil {
		return res, err
	}
	for _, mode := range []struct {
		name string
		skew time.Duration
	}{{fmt.Sprintf("clock-skew bound %v", cfg.Skew), cfg.Skew}, {"observe a full lease (the field's baseline)", 0}} {
		for _, late := range []bool{false, true} {
			for r := range cfg.Runs {
				fmt.Fprintf(progress, "takeover: %s, late %v, run %d of %d\n", mode.name, late, r+1, cfg.Runs)
				run, err := takeover(ctx, s, cfg, mode.skew, late, fmt.Sprintf("bench-takeover/s%d-l%v-r%d", mode.skew.Milliseconds(), late, r))
				if err != nil {
					return res, err
				}
				run.Mode = mode.name
				res.Takeovers = append(res.Takeovers, run)
			}
		}
	}
	for _, locks := range []int{1, cfg.Workers} {
		fmt.Fprintf(progress, "throughput: %d workers on %d lock(s) for %v\n", cfg.Workers, locks, cfg.Duration)
		tp, err := throughput(ctx, s, cfg.Workers, locks, cfg.Duration)
		if err != nil {
			return res, err
		}
		res.Throughput = append(res.Throughput, tp)
	}
	return res, nil
}

func createRawTable(ctx context.Context, api ddb.API, name string) error {
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return err
	}
	return dynamodb.NewTableExistsWaiter(api).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute)
}

// rawPut is what a user writes by hand for a lock: one conditional PutItem
// that replaces the item only if it holds the value last written.
func rawPut(ctx context.Context, api ddb.API, table string, prev, next int) (float64, error) {
	cond := expression.AttributeNotExists(expression.Name("pk"))
	if prev > 0 {
		cond = expression.Name("v").Equal(expression.Value(strconv.Itoa(prev)))
	}
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return 0, err
	}
	out, err := api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "lock"},
			"v":  &types.AttributeValueMemberS{Value: strconv.Itoa(next)},
		},
		ConditionExpression:       e.Condition(),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return 0, err
	}
	if out.ConsumedCapacity != nil {
		return aws.ToFloat64(out.ConsumedCapacity.CapacityUnits), nil
	}
	return 0, nil
}

func uncontended(ctx context.Context, api ddb.API, raw string, d *dynamostore.Driver, s *metastore.Store, ops int, res *LockResult) error {
	l, err := lock.New(lock.Metastore(s), &lock.Options{Lease: time.Minute})
	if err != nil {
		return err
	}
	const name = "bench/uncontended"
	// The first acquisition of a name creates its record; then a fresh
	// Locker (a new process) acquires once, reading the record first.
	ls, err := l.Acquire(ctx, name)
	if err != nil {
		return err
	}
	if err := ls.Release(ctx); err != nil {
		return err
	}
	fresh, err := lock.New(lock.Metastore(s), &lock.Options{Lease: time.Minute})
	if err != nil {
		return err
	}
	before, start := d.Stats(), time.Now()
	if ls, err = fresh.Acquire(ctx, name); err != nil {
		return err
	}
	st := d.Stats().Sub(before)
	res.Cold = LockCost{Op: "lake acquire, first by a process", Requests: float64(st.TotalRequests()), WriteUnits: st.WriteCapacity, P50: time.Since(start), P99: time.Since(start)}
	if err := ls.Release(ctx); err != nil {
		return err
	}
	var rawLat, acqLat, relLat []time.Duration
	var rawWCU float64
	var acqStats, relStats dynamostore.Stats
	for i := range ops {
		start := time.Now()
		wcu, err := rawPut(ctx, api, raw, i, i+1)
		if err != nil {
			return fmt.Errorf("lake: raw PutItem: %w", err)
		}
		rawLat = append(rawLat, time.Since(start))
		rawWCU += wcu
		before, start = d.Stats(), time.Now()
		ls, err := fresh.Acquire(ctx, name)
		if err != nil {
			return err
		}
		acqLat = append(acqLat, time.Since(start))
		mid := d.Stats()
		acqStats = addStats(acqStats, mid.Sub(before))
		start = time.Now()
		if err := ls.Release(ctx); err != nil {
			return err
		}
		relLat = append(relLat, time.Since(start))
		relStats = addStats(relStats, d.Stats().Sub(mid))
	}
	n := float64(ops)
	res.Costs = []LockCost{
		{Op: "raw SDK conditional PutItem", Requests: 1, WriteUnits: rawWCU / n, P50: pct(rawLat, 50), P99: pct(rawLat, 99)},
		{Op: "lake acquire", Requests: float64(acqStats.TotalRequests()) / n, WriteUnits: acqStats.WriteCapacity / n, P50: pct(acqLat, 50), P99: pct(acqLat, 99)},
		{Op: "lake release", Requests: float64(relStats.TotalRequests()) / n, WriteUnits: relStats.WriteCapacity / n, P50: pct(relLat, 50), P99: pct(relLat, 99)},
	}
	return nil
}

func addStats(a, b dynamostore.Stats) dynamostore.Stats {
	if a.Requests == nil {
		a.Requests = map[string]int64{}
	}
	for k, v := range b.Requests {
		a.Requests[k] += v
	}
	a.WriteCapacity += b.WriteCapacity
	a.ReadCapacity += b.ReadCapacity
	return a
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// takeover starts a holder process, lets it renew, kills it and measures
// how long a waiter that starts at the kill (or, late, a lease after it)
// takes to hold the lock.
func takeover(ctx context.Context, s *metastore.Store, cfg LockConfig, skew time.Duration, late bool, name string) (TakeoverRun, error) {
	run := TakeoverRun{Late: late}
	insp, err := lock.New(lock.Metastore(s), nil)
	if err != nil {
		return run, err
	}
	c := cfg.Holder(name, cfg.Lease)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return run, fmt.Errorf("lake: start holder: %w", err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	kill := func() {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		<-done
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := insp.Inspect(ctx, name)
		if err == nil && info.Held {
			break
		}
		if !errors.Is(err, metastore.ErrNotFound) && err != nil || time.Now().After(deadline) {
			kill()
			return run, fmt.Errorf("lake: the holder never held %s: %v", name, err)
		}
		select {
		case <-done:
			return run, fmt.Errorf("lake: the holder of %s exited early", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
	time.Sleep(cfg.Lease / 2) // at least one renewal
	kill()
	killed := time.Now()
	info, err := insp.Inspect(ctx, name)
	if err != nil {
		return run, err
	}
	w, err := lock.New(lock.Metastore(s), &lock.Options{Lease: cfg.Lease, Wait: 10 * cfg.Lease, ClockSkew: skew})
	if err != nil {
		return run, err
	}
	if late {
		time.Sleep(cfg.Lease)
	}
	arrived := time.Now()
	ls, err := w.Acquire(ctx, name)
	if err != nil {
		return run, err
	}
	got := time.Now()
	run.FromKill, run.FromExpiry, run.FromArrival = got.Sub(killed), got.Sub(info.Expires), got.Sub(arrived)
	return run, ls.Release(ctx)
}

// throughput runs workers for d, worker i on lock i%locks (each lock in its
// own namespace), each acquisition followed by one fenced write and a
// release.
func throughput(ctx context.Context, s *metastore.Store, workers, locks int, d time.Duration) (Throughput, error) {
	tp := Throughput{Locks: locks, Workers: workers}
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := lock.New(lock.Metastore(s), &lock.Options{Lease: 10 * time.Second, Wait: time.Minute})
			if err == nil {
				err = work(ctx, l, fmt.Sprintf("bench-ns%d/sync-%d", w%locks, locks), fmt.Sprintf("bench/lockdata/%d-%d", locks, w), end, &mu, &lat)
			}
			if err != nil {
				mu.Lock()
				firstErr = cmpOr(firstErr, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	tp.Wall = time.Since(start)
	tp.Acquisitions = len(lat)
	tp.P50, tp.P99 = pct(lat, 50), pct(lat, 99)
	return tp, firstErr
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func work(ctx context.Context, l *lock.Locker, name, key string, end time.Time, mu *sync.Mutex, lat *[]time.Duration) error {
	exp := metastore.ExpectAbsent()
	for n := 1; time.Now().Before(end); n++ {
		start := time.Now()
		ls, err := l.Acquire(ctx, name)
		if err != nil {
			return err
		}
		took := time.Since(start)
		v := []byte(strconv.Itoa(n))
		if err := ls.Write(ctx, metastore.Mutation{Key: key, Expect: exp, Value: v}); err != nil {
			ls.Release(ctx)
			return err
		}
		exp = metastore.ExpectValue(v)
		if err := ls.Release(ctx); err != nil {
			return err
		}
		mu.Lock()
		*lat = append(*lat, took)
		mu.Unlock()
	}
	return nil
}

// PrintLock prints the figures side by side.
func PrintLock(w io.Writer, r LockResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "uncontended (%d interleaved runs)\trequests/op\tWCU/op\tp50 ms\tp99 ms\tp50 vs PutItem\t\n", r.Config.Ops)
	base := r.Costs[0].P50
	for _, c := range append(slices.Clone(r.Costs), r.Cold) {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f×\t\n", c.Op, c.Requests, c.WriteUnits, ms(c.P50), ms(c.P99), float64(c.P50)/float64(max(base, 1)))
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "takeover of a killed holder (lease %v, heartbeat %v)\twaiter arrives\tkill→held ms\texpiry→held ms\tarrival→held ms\t\n", r.Config.Lease, (r.Config.Lease / 3).Round(time.Millisecond))
	for _, t := range r.Takeovers {
		when := "at the kill"
		if t.Late {
			when = "a lease later"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t\n", t.Mode, when, ms(t.FromKill), ms(t.FromExpiry), ms(t.FromArrival))
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "throughput (acquire, one fenced write, release)\tacquisitions\tper second\tp50 acquire ms\tp99 acquire ms\t\n")
	for _, t := range r.Throughput {
		fmt.Fprintf(tw, "%d workers on %d lock(s)\t%d\t%.1f\t%.2f\t%.2f\t\n", t.Workers, t.Locks, t.Acquisitions, float64(t.Acquisitions)/t.Wall.Seconds(), ms(t.P50), ms(t.P99))
	}
	return tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
