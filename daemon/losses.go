package daemon

import (
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/prometheus/client_golang/prometheus"
)

// lossDesc describes hindsight_steps_lost, read from the sidecars' loss
// ledgers at each scrape.
var lossDesc = prometheus.NewDesc("hindsight_steps_lost",
	"Steps sidecars lost or stored cut (reason truncated), per server and reason, from their durable ledgers.",
	[]string{"server", "reason"}, nil)

// lossCollector exports the loss ledgers of a home (see internal/losses).
type lossCollector struct{ home hindsight.Home }

// LossCollector returns a collector of hindsight_steps_lost{server,reason}
// for the loss ledgers under home.
func LossCollector(home hindsight.Home) prometheus.Collector { return lossCollector{home} }

func (c lossCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lossDesc }

func (c lossCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range losses.Scan(string(c.home)) {
		for reason, n := range s.Reasons {
			ch <- prometheus.MustNewConstMetric(lossDesc, prometheus.GaugeValue, float64(n), s.Server, reason)
		}
	}
}
