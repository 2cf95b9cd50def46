package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lakemeta/lake/internal/ddb"
	"github.com/lakemeta/lake/metastore"
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/lakemeta/lake/migrate"
)

// Detection is what one check strategy's online precheck said after the
// writes since the verify.
type Detection struct {
	Strategy string
	// Refused is set when the precheck refused; Named counts the keys it
	// found different.
	Refused  bool
	Named    int64
	Precheck time.Duration
}

// FinalizeFigures are one check strategy's figures on the same changes:
// the online precheck, and the write pause from the barrier's installation
// to the marker (for the strategies only rehearsed, to the end of the
// re-check under the barrier, then abort-finalize).
type FinalizeFigures struct {
	Strategy  string
	Precheck  time.Duration
	Pause     time.Duration
	Checked   int64 // keys re-checked under the barrier
	Records   int   // stream records read
	Published bool  // the marker was published (else a rehearsal)
}

// afterVerify writes cfg.Mutations keys: four fifths through lake (new
// keys), one fifth by a raw SDK client on v1 as a legacy binary would
// (PutItem overwrites and creations, UpdateItem overwrites keeping lake's
// stamp, batch deletes), and returns how many were legacy.
func afterVerify(ctx context.Context, api ddb.API, s *metastore.Store, cfg MigrationConfig) (int, error) {
	legacy := max(cfg.Mutations/5, 4)
	for i := range cfg.Mutations - legacy {
		if err := s.Put(ctx, fmt.Sprintf("tbl/changed-after-verify-%05d", i), []byte("x")); err != nil {
			return 0, err
		}
	}
	pk := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: k}}
	}
	var deletes []types.WriteRequest
	for i := range legacy {
		key := retainedKey(i*7, 200) // an existing record; distinct for distinct i
		var err error
		switch i % 4 {
		case 0:
			it := pk(key)
			it["v"] = &types.AttributeValueMemberB{Value: []byte("legacy put")}
			_, err = api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(cfg.Table), Item: it})
		case 1:
			it := pk(fmt.Sprintf("tbl/legacy-created-%05d", i))
			it["v"] = &types.AttributeValueMemberB{Value: []byte("legacy create")}
			_, err = api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(cfg.Table), Item: it})
		case 2:
			_, err = api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(cfg.Table), Key: pk(key),
				UpdateExpression:          aws.String("SET v = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberB{Value: []byte("legacy update")}}})
		case 3:
			deletes = append(deletes, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: pk(key)}})
		}
		if err != nil {
			return 0, fmt.Errorf("legacy write: %w", err)
		}
	}
	for len(deletes) > 0 {
		n := min(len(deletes), 25)
		pending := map[string][]types.WriteRequest{cfg.Table: deletes[:n]}
		for len(pending) > 0 {
			out, err := api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return 0, fmt.Errorf("legacy delete: %w", err)
			}
			pending = out.UnprocessedItems
		}
		deletes = deletes[n:]
	}
	return legacy, nil
}

// errStop stops a rehearsed finalization at a crash point.
var errStop = errors.New("stop")

// detect runs the precheck of the change log alone (stopped before the
// barrier, recording nothing) and then of the default check (which refuses
// and records the differences for repair).
func detect(ctx context.Context, d *dynamostore.Driver, m *migrate.Migrator, cfg MigrationConfig) ([]Detection, error) {
	var out []Detection
	stop := func(p string) error {
		if p == "finalize:prechecked" {
			return errStop
		}
		return nil
	}
	cl, err := migrate.New(d, &migrate.Options{PageSize: cfg.PageSize, ChangeLogOnly: true, Crash: stop})
	if err != nil {
		return nil, err
	}
	rep, err := cl.Finalize(ctx)
	if !errors.Is(err, migrate.ErrCrashed) && !errors.Is(err, migrate.ErrDifferences) {
		return nil, fmt.Errorf("change-log precheck: %w", err)
	}
	out = append(out, Detection{Strategy: "change log alone", Refused: err != nil && !errors.Is(err, migrate.ErrCrashed),
		Named: rep.Precheck.MissingInV2 + rep.Precheck.ExtraInV2 + rep.Precheck.Different, Precheck: rep.Precheck.Duration})
	rep, err = m.Finalize(ctx)
	if !errors.Is(err, migrate.ErrDifferences) {
		return nil, fmt.Errorf("the default precheck should refuse the legacy writes: %v", err)
	}
	out = append(out, Detection{Strategy: "change log + stream", Refused: true,
		Named: rep.Precheck.MissingInV2 + rep.Precheck.ExtraInV2 + rep.Precheck.Different, Precheck: rep.Precheck.Duration})
	return out, nil
}

// finalizeWith runs finalize with opts; unless complete, it stops after the
// re-check under the barrier and aborts the finalization (writes resume).
func finalizeWith(ctx context.Context, d *dynamostore.Driver, cfg MigrationConfig, opts migrate.Options, complete bool, progress io.Writer) (FinalizeFigures, error) {
	var barrier, rechecked time.Time
	opts.PageSize, opts.Progress = cfg.PageSize, progress
	opts.Crash = func(p string) error {
		switch p {
		case "finalize:barrier-installed":
			barrier = time.Now()
		case "finalize:reverified":
			rechecked = time.Now()
			if !complete {
				return errStop
			}
		}
		return nil
	}
	m, err := migrate.New(d, &opts)
	if err != nil {
		return FinalizeFigures{}, err
	}
	rep, err := m.Finalize(ctx)
	f := FinalizeFigures{Precheck: rep.Precheck.Duration, Checked: rep.Reverify.Checked, Records: rep.Records, Published: complete}
	if !complete {
		if !errors.Is(err, migrate.ErrCrashed) {
			return f, fmt.Errorf("rehearsal: %v", err)
		}
		f.Pause = rechecked.Sub(barrier)
		return f, m.Run(ctx, "abort-finalize")
	}
	if err != nil {
		return f, err
	}
	f.Pause = rep.Pause
	return f, nil
}

func printFinalize(w io.Writer, r MigrationResult) {
	fmt.Fprintf(w, "after the verify:  %d keys written, %d of them by a raw SDK client (PutItem, UpdateItem, batch deletes)\n", r.Written, r.Legacy)
	for _, dt := range r.Detection {
		verdict := fmt.Sprintf("passed, naming no difference (the %d legacy writes missed)", r.Legacy)
		if dt.Refused {
			verdict = fmt.Sprintf("refused, naming %d differing keys", dt.Named)
		}
		fmt.Fprintf(w, "  precheck, %-20s %v: %s\n", dt.Strategy+":", dt.Precheck.Round(time.Millisecond), verdict)
	}
	fmt.Fprintf(w, "finalize after repair, same changes (settle delay %v in the stream's pause):\n", migrate.DefaultSettle)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  check\tprecheck (online)\twrite pause\tkeys re-checked under the barrier\tstream records read (both checks)\tmarker")
	for _, f := range r.Finalize {
		marker := "rehearsal: stopped after the re-check, abort-finalize"
		if f.Published {
			marker = "published"
		}
		fmt.Fprintf(tw, "  %s\t%v\t%v\t%d\t%d\t%s\n", f.Strategy, f.Precheck.Round(time.Millisecond), f.Pause.Round(time.Millisecond), f.Checked, f.Records, marker)
	}
	tw.Flush()
}
