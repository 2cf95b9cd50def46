package nodewatch

import (
	"github.com/lakemeta/lake/metastore/dynamostore"
	"github.com/prometheus/client_golang/prometheus"
)

// costCollector exports a DynamoDB store's cost counters.
type costCollector struct{ d *dynamostore.Driver }

// CostCollector returns a collector of d's cost counters (Driver.Stats):
// requests, items evaluated and returned, capacity units, control requests.
func CostCollector(d *dynamostore.Driver) prometheus.Collector { return costCollector{d} }

var (
	descBackendReq  = prometheus.NewDesc("lake_backend_requests_total", "Backend requests for user data, by DynamoDB operation.", []string{"op"}, nil)
	descBackendEval = prometheus.NewDesc("lake_backend_items_evaluated_total", "Items the backend evaluated (ScannedCount; one per point read), by DynamoDB operation.", []string{"op"}, nil)
	descBackendRet  = prometheus.NewDesc("lake_backend_items_returned_total", "Items the backend returned.", nil, nil)
	descBackendCap  = prometheus.NewDesc("lake_backend_capacity_units_total", "Capacity units the backend reported, by kind (read, write).", []string{"kind"}, nil)
	descBackendCtl  = prometheus.NewDesc("lake_backend_control_requests_total", "Backend requests for lake's control records (state, registries).", nil, nil)
)

// Describe implements prometheus.Collector.
func (c costCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBackendReq, descBackendEval, descBackendRet, descBackendCap, descBackendCtl} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c costCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	for op, n := range s.Requests {
		ch <- prometheus.MustNewConstMetric(descBackendReq, prometheus.CounterValue, float64(n), op)
	}
	for op, n := range s.EvaluatedBy {
		ch <- prometheus.MustNewConstMetric(descBackendEval, prometheus.CounterValue, float64(n), op)
	}
	ch <- prometheus.MustNewConstMetric(descBackendRet, prometheus.CounterValue, float64(s.ItemsReturned))
	ch <- prometheus.MustNewConstMetric(descBackendCap, prometheus.CounterValue, s.ReadCapacity, "read")
	ch <- prometheus.MustNewConstMetric(descBackendCap, prometheus.CounterValue, s.WriteCapacity, "write")
	ch <- prometheus.MustNewConstMetric(descBackendCtl, prometheus.CounterValue, float64(s.ControlRequests))
}
