package capoadopt

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// capoConfigArg is how Capo's chart and manifests start its manager: it
// tells Capo's Deployment from others in its namespace.
const capoConfigArg = "--config=/capo_config.yaml"

// Zone is what Capo's Deployment says of the zone its manager writes its
// times in (Go's time.Local: TZ when set, else the image's /etc/localtime).
type Zone struct {
	Deployment string // Capo's, "" when none runs Capo's manager
	// Name is the zone, set only when the Deployment says it for certain:
	// TZ given as a value in the manager's env.
	Name string
	// Unsure says why the Deployment does not say it, when it does not.
	Unsure string
}

// DeployedZone reads the zone of Capo's manager from the Deployments of
// Capo's namespace, only where it is certain: a wrong zone shifts every
// age by its offset, and a zone east of the truth ends reservations early.
func DeployedZone(deploys []appsv1.Deployment) Zone {
	for _, d := range deploys {
		for _, c := range d.Spec.Template.Spec.Containers {
			if slices.Contains(c.Args, capoConfigArg) || slices.Contains(c.Command, capoConfigArg) {
				z := containerZone(c)
				z.Deployment = d.Name
				return z
			}
		}
	}
	return Zone{}
}

// containerZone is the zone c runs in, as its spec says it. The last TZ
// of env counts, and env wins over envFrom, as the kubelet builds them.
func containerZone(c corev1.Container) Zone {
	var tz *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "TZ" {
			tz = &c.Env[i]
		}
	}
	switch {
	case tz != nil && tz.ValueFrom != nil:
		return Zone{Unsure: "its manager's TZ is set from " + source(tz.ValueFrom) + ", which capoctl does not read"}
	case tz != nil:
		return valueZone(tz.Value)
	case len(c.EnvFrom) > 0:
		return Zone{Unsure: "its manager sets no TZ of its own, and may get one through envFrom"}
	}
	why := "its manager sets no TZ, so its zone is its image's /etc/localtime, which capoctl cannot read (Capo's own image has none: UTC)"
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/etc/localtime" || strings.HasPrefix(m.MountPath, "/usr/share/zoneinfo") {
			why = "its manager sets no TZ and mounts " + m.MountPath + " (volume " + m.Name + "), whose zone capoctl cannot read"
		}
	}
	return Zone{Unsure: why}
}

// valueZone reads TZ as Go does: empty is UTC, a leading ':' is dropped,
// and an absolute path is a file in the image.
func valueZone(v string) Zone {
	v = strings.TrimPrefix(v, ":")
	switch {
	case v == "":
		return Zone{Name: "UTC"}
	case strings.HasPrefix(v, "/"):
		return Zone{Unsure: fmt.Sprintf("its manager's TZ is the file %s in its image, which capoctl cannot read", v)}
	}
	return Zone{Name: v}
}

func source(s *corev1.EnvVarSource) string {
	switch {
	case s.ConfigMapKeyRef != nil:
		return fmt.Sprintf("ConfigMap %s key %s", s.ConfigMapKeyRef.Name, s.ConfigMapKeyRef.Key)
	case s.SecretKeyRef != nil:
		return fmt.Sprintf("Secret %s key %s", s.SecretKeyRef.Name, s.SecretKeyRef.Key)
	case s.FieldRef != nil:
		return "field " + s.FieldRef.FieldPath
	}
	return "a valueFrom"
}
