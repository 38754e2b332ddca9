package capoadopt

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
)

// capoConfigArg is how Capo's chart and manifests start its manager: it
// tells Capo's Deployment from others in its namespace.
const capoConfigArg = "--config=/capo_config.yaml"

// DeployedZone is the zone Capo's running manager writes its times in: the
// TZ of the manager container of a Deployment in Capo's namespace, "UTC"
// when it sets none (Capo's distroless image has no /etc/localtime). found
// is false when no Deployment there runs Capo's manager (Capo removed).
func DeployedZone(deploys []appsv1.Deployment) (zone, deployment string, found bool) {
	for _, d := range deploys {
		for _, c := range d.Spec.Template.Spec.Containers {
			if !slices.Contains(c.Args, capoConfigArg) && !slices.Contains(c.Command, capoConfigArg) {
				continue
			}
			zone = "UTC"
			for _, e := range c.Env {
				if e.Name == "TZ" && e.Value != "" {
					zone = e.Value
				}
			}
			return zone, d.Name, true
		}
	}
	return "", "", false
}
