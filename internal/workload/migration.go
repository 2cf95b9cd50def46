package workload

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/internal/faultproxy"
	"github.com/lakemeta/lake/internal/lincheck"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
)

// MigrationRun configures RunMigration.
type MigrationRun struct {
	// AWS and Endpoint reach DynamoDB (Local); the run puts a fault proxy
	// in front of Endpoint.
	AWS      aws.Config
	Endpoint string
	// Table is created fresh (it must not exist) and deleted at the end.
	Table     string
	Seed      uint64
	Clients   int
	Ops       int     // per client
	FaultRate float64 // of requests, spread over every fault kind
	// CheckTimeout bounds the linearizability check; OutDir receives the
	// history and its visualisation when the check fails.
	CheckTimeout time.Duration
	OutDir       string
	// Attempts bounds each operation's attempts (the store's retries);
	// default 10. Few attempts under many faults leave outcomes unknown,
	// which the checker must then accept either way.
	Attempts int
	// Nodes, when positive, puts that many lake serve nodes between the
	// clients and DynamoDB (client c uses node c mod Nodes); the phases that
	// restart clients restart the nodes too.
	Nodes int
}

// MigrationReport is what one run did and found.
type MigrationReport struct {
	Stats    Stats
	Requests int
	Faults   map[faultproxy.Fault]int
	Check    lincheck.Result
	Final    dynamostore.State
}

// RunMigration runs one checked workload while the migration walks from v1
// to v2-authoritative (dual with a restart, backfill, verify, finalize with
// a restart), with faults on the wire, and checks the history.
func RunMigration(ctx context.Context, r MigrationRun) (MigrationReport, error) {
	var rep MigrationReport
	direct := ddb.NewClient(r.AWS, r.Endpoint)
	if err := dynamostore.Create(ctx, direct, dynamostore.Options{Table: r.Table}); err != nil {
		return rep, err
	}
	defer func() {
		for _, name := range []string{r.Table, r.Table + dynamostore.V2Suffix} {
			direct.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	}()
	p, err := faultproxy.Start(r.Endpoint, r.Seed)
	if err != nil {
		return rep, err
	}
	defer p.Close()
	rates := map[faultproxy.Fault]float64{}
	for _, f := range faultproxy.All {
		rates[f] = r.FaultRate / float64(len(faultproxy.All))
	}
	p.SetRates(rates)
	api := ddb.NewClient(r.AWS, p.URL)
	const refresh = 100 * time.Millisecond
	opts := dynamostore.Options{Table: r.Table, Refresh: refresh,
		Retryer: ddb.NewRetryer(ddb.RetryOptions{MaxAttempts: cmp.Or(r.Attempts, 10), BaseDelay: 2 * time.Millisecond, MaxDelay: 50 * time.Millisecond})}
	openStore := func(ctx context.Context) (*metastore.Store, error) {
		var err error
		for range 10 { // opening crosses the faulty wire too
			var d *dynamostore.Driver
			if d, err = dynamostore.Open(ctx, api, opts); err == nil {
				return metastore.New(d), nil
			}
		}
		return nil, err
	}
	open := func(ctx context.Context, _ int) (*metastore.Store, error) { return openStore(ctx) }
	var fleet *nodes
	if r.Nodes > 0 {
		fleet = &nodes{open: openStore, refresh: refresh}
		if err := fleet.start(ctx, r.Nodes); err != nil {
			return rep, err
		}
		defer fleet.stop()
		open = fleet.client
	}
	// The migrator retries as a production operator's would, whatever the
	// clients' attempts: the point of few attempts is unknown client
	// outcomes, not a migration that never gets through.
	mopts := opts
	mopts.Retryer = ddb.NewRetryer(ddb.RetryOptions{MaxAttempts: 10, BaseDelay: 2 * time.Millisecond, MaxDelay: 50 * time.Millisecond})
	md, err := dynamostore.Open(ctx, api, mopts)
	if err != nil {
		return rep, err
	}
	m, err := migrate.New(md, &migrate.Options{Refresh: refresh, PageSize: 25, Segments: 2})
	if err != nil {
		return rep, err
	}
	step := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			if err := m.Run(ctx, name); err != nil {
				return err
			}
			if fleet != nil && (name == "dual" || name == "finalize") {
				return fleet.startNext(ctx) // clients move to the new nodes after the phase
			}
			return nil
		}
	}
	var retire func(context.Context) error
	if fleet != nil {
		retire = fleet.retire
	}
	phases := []Phase{
		{Name: "dual", Run: step("dual"), Restart: true, After: retire},
		{Name: "backfill", Run: step("backfill")},
		{Name: "verify", Run: step("verify")},
		{Name: "finalize", Run: step("finalize"), Restart: true, After: retire},
	}
	rec := lincheck.NewRecorder()
	cfg := Config{Clients: r.Clients, OpsPerClient: r.Ops, Groups: 4, KeysPerGroup: 3, Seed: r.Seed}
	if rep.Stats, err = Run(ctx, cfg, open, phases, rec); err != nil {
		return rep, err
	}
	st, err := m.Status(ctx)
	if err != nil {
		return rep, err
	}
	rep.Final = st.State
	rep.Faults, rep.Requests = p.Injected()
	timeout := r.CheckTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	rep.Check, err = lincheck.Check(rec.Operations(), timeout, r.OutDir, fmt.Sprintf("%s-seed%d", r.Table, r.Seed))
	return rep, err
}

// Summary is one line.
func (r MigrationReport) Summary() string {
	return fmt.Sprintf("%d ops (%d unknown, %d paused, %d diverged, %d conflicts), %d restarts, final state %s; %d requests, faults %v; verdict %s",
		r.Stats.Ops, r.Stats.Unknown, r.Stats.Paused, r.Stats.Diverged, r.Stats.Conflicts, r.Stats.Restarts, r.Final, r.Requests, r.Faults, r.Check.Verdict)
}
