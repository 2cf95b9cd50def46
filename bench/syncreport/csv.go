package syncreport

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/lakemeta/lake/bench/syncload"
)

// Run is one configuration's series.
type Run struct {
	Config syncload.Config
	Rows   []syncload.Row
}

// WriteCSV writes every run's rows to w: a header, then one line per
// interval, the configuration's name first and the hot key last.
func WriteCSV(w io.Writer, runs []Run) error {
	cw := csv.NewWriter(w)
	var header []string
	for _, r := range runs {
		for _, row := range r.Rows {
			names, vals := row.Columns()
			if header == nil {
				header = append(append([]string{"config"}, names...), "hot_key")
				if err := cw.Write(header); err != nil {
					return fmt.Errorf("lake: write csv: %w", err)
				}
			}
			rec := []string{r.Config.Name}
			for _, v := range vals {
				rec = append(rec, strconv.FormatFloat(v, 'g', 6, 64))
			}
			rec = append(rec, row.HotKey)
			if err := cw.Write(rec); err != nil {
				return fmt.Errorf("lake: write csv: %w", err)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("lake: write csv: %w", err)
	}
	return nil
}
