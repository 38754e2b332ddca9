package daemon

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// withOldNames serves each renamed metric under its old name too, renamed
// mapping a current name to its old one: capo deprecates for one minor
// release before it removes (docs/releasing.md), so a dashboard or an
// alert on the old name keeps working through an upgrade. The copy's help
// says what replaces it.
func withOldNames(g prometheus.Gatherer, renamed map[string]string) prometheus.Gatherer {
	if len(renamed) == 0 {
		return g
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs
		for _, mf := range mfs {
			old, ok := renamed[mf.GetName()]
			if !ok {
				continue
			}
			c, ok := proto.Clone(mf).(*dto.MetricFamily)
			if !ok {
				continue
			}
			c.Name = proto.String(old)
			c.Help = proto.String("Deprecated, removed in the next minor release: renamed " + mf.GetName() + ". " + mf.GetHelp())
			out = append(out, c)
		}
		slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
		return out, err
	})
}
