package apigroup

import "github.com/prometheus/client_golang/prometheus"

// Info is capo_calico_api_info: 1, labelled with the group in force and
// where it came from (both bounded sets), once the process has decided.
func Info() prometheus.Collector { return info{} }

type info struct{}

var infoDesc = prometheus.NewDesc("capo_calico_api_info",
	"1, labelled with the API group capo reads and writes Calico's resources in (none on etcdv3) and where that choice came from (env, netconf, discovery, etcdv3).",
	[]string{"group", "source"}, nil)

func (info) Describe(ch chan<- *prometheus.Desc) { ch <- infoDesc }

func (info) Collect(ch chan<- prometheus.Metric) {
	m, ok := InForce()
	if !ok {
		return
	}
	group := m.Group
	if m.Source == SourceEtcd {
		group = "none"
	}
	ch <- prometheus.MustNewConstMetric(infoDesc, prometheus.GaugeValue, 1, group, m.Source)
}
