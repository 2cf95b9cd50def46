package syncreport

import "github.com/lakemeta/lake/bench/syncload"

// Summary compares the first tenth of a run with its last tenth: the
// shape of the curve, which is what the seed says a short benchmark hides.
type Summary struct {
	Name, Config                   string
	Iterations, Errors, Timeouts   int
	RateFirst, RateLast, RateRatio float64
	ReadFirst, ReadLast            float64
	WrittenFirst, WrittenLast      float64
	CatalogEnd                     int
	IndexEnd                       float64
	// RequestsFirst and RequestsLast are the store's own requests per
	// sync (DynamoDB's or S3's; lake's calls on bolt and a node), first
	// and last tenth.
	RequestsFirst, RequestsLast float64
}

// Summarize returns r's summary. The tenths are of its rows (at least one
// row each); RateRatio is RateLast/RateFirst (0 when RateFirst is 0).
func Summarize(r Run) Summary {
	s := Summary{Name: r.Config.Name, Config: r.Config.Summary()}
	for _, row := range r.Rows {
		s.Iterations += row.Iterations
		s.Errors += row.Errors
		s.Timeouts += row.LockTimeouts
	}
	n := len(r.Rows)
	if n == 0 {
		return s
	}
	k := max(1, n/10)
	mean := func(rows []syncload.Row, f func(syncload.Row) float64) float64 {
		t := 0.0
		for _, row := range rows {
			t += f(row)
		}
		return t / float64(len(rows))
	}
	first, last := r.Rows[:k], r.Rows[n-k:]
	rate := func(x syncload.Row) float64 { return x.IterPerSec }
	read := func(x syncload.Row) float64 { return x.ItemsReadPerSync }
	written := func(x syncload.Row) float64 { return x.ItemsWrittenPerSync }
	s.RateFirst, s.RateLast = mean(first, rate), mean(last, rate)
	if s.RateFirst > 0 {
		s.RateRatio = s.RateLast / s.RateFirst
	}
	s.ReadFirst, s.ReadLast = mean(first, read), mean(last, read)
	s.WrittenFirst, s.WrittenLast = mean(first, written), mean(last, written)
	requests := func(x syncload.Row) float64 {
		if x.StoreRequestsPerSync > 0 {
			return x.StoreRequestsPerSync
		}
		return x.RequestsPerSync
	}
	s.RequestsFirst, s.RequestsLast = mean(first, requests), mean(last, requests)
	s.CatalogEnd = r.Rows[n-1].CatalogRows
	s.IndexEnd = r.Rows[n-1].IndexEntries
	return s
}
