package health

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

var checkDesc = prometheus.NewDesc("acm_sp_health_check_healthy",
	"1 while a health check passes, 0 while it fails (informational checks never decide the overall status).",
	[]string{"check", "informational"}, nil)

// Collector exports every check's latest result as acm_sp_health_check_healthy{check, informational}: the label
// values are the fixed check names.
func (c *Checker) Collector() prometheus.Collector { return checkCollector{c} }

type checkCollector struct{ c *Checker }

func (k checkCollector) Describe(ch chan<- *prometheus.Desc) { ch <- checkDesc }

func (k checkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, hc := range k.c.Report().Checks {
		v := 0.0
		if hc.Status == api.HealthCheckStatusHealthy {
			v = 1
		}
		informational := hc.Informational != nil && *hc.Informational
		ch <- prometheus.MustNewConstMetric(checkDesc, prometheus.GaugeValue, v, hc.Name, strconv.FormatBool(informational))
	}
}
