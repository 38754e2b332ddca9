package release

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/capo-net/capo/deploy"
)

// ManifestsFile is the rendered manifests' name in the release.
func (s Spec) ManifestsFile() string { return "capo-" + s.Version + ".yaml" }

// AdmissionFile is the admission policy's manifests, for Kubernetes 1.30+.
func (s Spec) AdmissionFile() string { return "capo-" + s.Version + "-admission-policy.yaml" }

// ChartVersion is the chart's version: the release's without the v, as
// Helm charts are versioned; appVersion keeps the v, as the image tag does.
func (s Spec) ChartVersion() string { return strings.TrimPrefix(s.Version, "v") }

// StampChart sets the chart's version and appVersion to the release's; the
// image tag defaults to appVersion, so the chart names the release's image.
func StampChart(c *chart.Chart, s Spec) {
	c.Metadata.Version = s.ChartVersion()
	c.Metadata.AppVersion = s.Version
}

// writeChart packages the stamped chart (capo-X.Y.Z.tgz) and renders its
// defaults as `make manifests` does.
func writeChart(s Spec) error {
	c, err := deploy.LoadChart()
	if err != nil {
		return err
	}
	StampChart(c, s)
	if err := c.Validate(); err != nil {
		return fmt.Errorf("the stamped chart: %w", err)
	}
	if _, err := chartutil.Save(c, s.Out); err != nil {
		return fmt.Errorf("packaging the chart: %w", err)
	}
	out, policy, err := deploy.RenderManifests(c)
	if err != nil {
		return err
	}
	head := fmt.Sprintf("# capo %s: the chart's defaults, rendered for kubectl apply (Kubernetes %s). On 1.30+, apply %s too.\n", s.Version, c.Metadata.KubeVersion, s.AdmissionFile())
	if err := publish(s.Out, s.ManifestsFile(), append([]byte(head), out...), 0o644); err != nil {
		return err
	}
	head = fmt.Sprintf("# capo %s: the chart's admission policy (ValidatingAdmissionPolicy v1, Kubernetes 1.30+), applied after %s.\n", s.Version, s.ManifestsFile())
	return publish(s.Out, s.AdmissionFile(), append([]byte(head), policy...), 0o644)
}

// Repo is the image repository the chart's values.yaml names.
const Repo = "ghcr.io/capo-net/capo"
