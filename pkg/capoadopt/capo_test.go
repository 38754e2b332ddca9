package capoadopt

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/reserve"
)

var shanghai = func() *time.Location {
	l, err := time.LoadLocation(DefaultZone)
	if err != nil {
		panic(err)
	}
	return l
}()

// now is 20:00 in Shanghai.
var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// capoObjects are as Capo's webhook leaves them: the placeholder first,
// bare addresses appended, one deleted twice, one released (ConfigMap
// only after a failed update), one record Capo cannot parse.
func capoObjects() Source {
	return Source{
		CIDRs: []string{"1.1.1.1", "10.0.0.5", "10.0.0.6", "10.0.0.5", "10.0.0.7", "10.9.0.0/24", "10.0.0.8"},
		Times: map[string]string{
			"10.0.0.5": "kafka_broker-0_node-a_2026-11-25-19:50:00", // 10 minutes ago
			"10.0.0.6": "redis_redis-1_node-b_2026-11-25-18:00:00",  // 2 hours ago
			"10.0.0.7": "redis_redis-2_node-b_yesterday",
			"10.0.0.9": "redis_redis-3_node-b_2026-11-25-19:00:00",
			"10.0.0.8": "redis_redis-4_node-a_2026-11-25-21:00:00", // an hour ahead: wrong zone
		},
		Zone: shanghai,
	}
}

func TestRead(t *testing.T) {
	cands, skipped := Read(capoObjects(), now)
	var got []string
	for _, c := range cands {
		got = append(got, c.IP+" "+c.Node+" "+c.Namespace+"/"+c.Pod+" "+c.Seen.Format(time.RFC3339)+" "+c.ReservedAt.Format(time.RFC3339))
		if c.Reason != reserve.ReasonCapo {
			t.Errorf("%s: reason %q", c.IP, c.Reason)
		}
	}
	want := []string{
		"10.0.0.5 node-a kafka/broker-0 2026-11-25T11:50:00Z 2026-11-25T11:50:00Z",
		"10.0.0.6 node-b redis/redis-1 2026-11-25T10:00:00Z 2026-11-25T10:00:00Z",
		"10.0.0.7  / 0001-01-01T00:00:00Z 2026-11-25T12:00:00Z", // unreadable: held a TTL from the controller's first sight
		"10.0.0.8 node-a redis/redis-4 2026-11-25T12:00:00Z 2026-11-25T12:00:00Z",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("candidates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(cands[2].Note, "not namespace_pod_node_time") && !strings.Contains(cands[2].Note, "time not in") {
		t.Errorf("note %q", cands[2].Note)
	}
	if !strings.Contains(cands[3].Note, "in the future") {
		t.Errorf("note %q", cands[3].Note)
	}
	if len(skipped) != 2 || skipped[0].Addr != "10.0.0.9" || !strings.Contains(skipped[0].Why, "released") || skipped[1].Addr != "10.9.0.0/24" {
		t.Fatalf("skipped %+v", skipped)
	}
}

func TestReadZoneDecidesAge(t *testing.T) {
	src := Source{CIDRs: []string{"1.1.1.1", "10.0.0.5"}, Times: map[string]string{"10.0.0.5": "a_b-0_n_2026-11-25-11:50:00"}, Zone: time.UTC}
	cands, _ := Read(src, now)
	if len(cands) != 1 || !cands[0].Seen.Equal(now.Add(-10*time.Minute)) {
		t.Fatalf("%+v", cands)
	}
}

func TestParseRecord(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"ns_pod-0_node.example.com_2026-11-25-19:50:00", ""},
		{"ns_pod-0__2026-11-25-19:50:00", ""}, // a pod deleted before it was scheduled: no node
		{"", "no time"},
		{"ns_pod_node", "not namespace_pod_node_time"},
		{"ns_pod_node_2026-11-25T19:50:00", "time not in"},
	} {
		_, _, _, _, err := ParseRecord(tc.in, shanghai)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestExclude(t *testing.T) {
	cands, _ := Read(capoObjects(), now)
	keep, skipped := Exclude(cands, map[string]*calico.Holder{
		"10.0.0.5": {Handle: "k8s-pod-network.abc", Namespace: "kafka", Pod: "broker-0"}, // Capo's pod, still tearing down
		"10.0.0.6": {Handle: "k8s-pod-network.def", Namespace: "web", Pod: "web-7"},
		"10.0.0.7": {Handle: "ipip-tunnel-addr-node-b"},
		"10.0.0.8": {Cooling: true}, // released into Calico's IP cooldown: nobody's
	})
	if len(keep) != 2 || keep[0].IP != "10.0.0.5" || keep[1].IP != "10.0.0.8" || !strings.Contains(keep[0].Note, "teardown") {
		t.Fatalf("keep %+v", keep)
	}
	if len(skipped) != 2 || skipped[0].Why != "allocated since to pod web/web-7" || !strings.Contains(skipped[1].Why, "ipip-tunnel") {
		t.Fatalf("skipped %+v", skipped)
	}
	byNode := ByNode(keep)
	if len(byNode["node-a"]) != 2 {
		t.Fatalf("%v", byNode)
	}
}

// The zone is read only where the Deployment says it for certain: TZ as
// a value (the last one, as the kubelet takes it). Anything else says why.
func TestDeployedZone(t *testing.T) {
	manager := func(c corev1.Container) appsv1.Deployment {
		d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "capo"}}
		c.Name, c.Command, c.Args = "manager", []string{"/manager"}, []string{"--config=/capo_config.yaml"}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "kube-rbac-proxy", Args: []string{"--secure-listen-address=0.0.0.0:8443"}}, c}
		return d
	}
	tz := func(v string) corev1.EnvVar { return corev1.EnvVar{Name: "TZ", Value: v} }
	fromCM := corev1.EnvVar{Name: "TZ", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "clock"}, Key: "tz"}}}
	other := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	for name, c := range map[string]struct {
		spec         corev1.Container
		zone, unsure string
	}{
		"TZ value":          {corev1.Container{Env: []corev1.EnvVar{{Name: "POD_NAMESPACE"}, tz("Asia/Shanghai")}}, "Asia/Shanghai", ""},
		"last TZ counts":    {corev1.Container{Env: []corev1.EnvVar{tz("Asia/Shanghai"), tz("America/New_York")}}, "America/New_York", ""},
		"colon form":        {corev1.Container{Env: []corev1.EnvVar{tz(":Europe/Berlin")}}, "Europe/Berlin", ""},
		"empty TZ is UTC":   {corev1.Container{Env: []corev1.EnvVar{tz("")}}, "UTC", ""},
		"TZ over envFrom":   {corev1.Container{Env: []corev1.EnvVar{tz("UTC")}, EnvFrom: []corev1.EnvFromSource{{}}}, "UTC", ""},
		"TZ from ConfigMap": {corev1.Container{Env: []corev1.EnvVar{fromCM}}, "", "ConfigMap clock key tz"},
		"TZ a file":         {corev1.Container{Env: []corev1.EnvVar{tz("/etc/zone")}}, "", "the file /etc/zone"},
		"envFrom only":      {corev1.Container{EnvFrom: []corev1.EnvFromSource{{}}}, "", "envFrom"},
		"no TZ":             {corev1.Container{}, "", "image's /etc/localtime"},
		"localtime mounted": {corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "lt", MountPath: "/etc/localtime"}}}, "", "mounts /etc/localtime"},
	} {
		z := DeployedZone([]appsv1.Deployment{other, manager(c.spec)})
		if z.Deployment != "capo" || z.Name != c.zone || (c.unsure == "") != (z.Unsure == "") || !strings.Contains(z.Unsure, c.unsure) {
			t.Errorf("%s: %+v", name, z)
		}
	}
	if z := DeployedZone([]appsv1.Deployment{other}); z != (Zone{}) {
		t.Fatalf("found Capo in a namespace without it: %+v", z)
	}
}

// Read in two zones, a time is the later of its two readings.
// A reading in the future is of a zone Capo did not write in: of two,
// the later one that is not in the future is kept.
func TestReadTwoZonesSkipsAReadingInTheFuture(t *testing.T) {
	rec := map[string]string{"10.0.0.5": "a_b-0_n_" + now.Add(-10*time.Minute).In(shanghai).Format(TimeLayout)} // 10 minutes ago in Shanghai; 7h50m ahead in UTC
	for _, src := range []Source{
		{CIDRs: []string{"10.0.0.5"}, Times: rec, Zone: shanghai, Also: time.UTC},
		{CIDRs: []string{"10.0.0.5"}, Times: rec, Zone: time.UTC, Also: shanghai},
	} {
		cands, _ := Read(src, now)
		if len(cands) != 1 || !cands[0].Seen.Equal(now.Add(-10*time.Minute)) || cands[0].Note != "" {
			t.Fatalf("%v/%v: %+v", src.Zone, src.Also, cands)
		}
	}
}

func TestReadTwoZonesKeepsTheLater(t *testing.T) {
	rec := map[string]string{"10.0.0.5": "a_b-0_n_2026-11-25-11:50:00"} // 10 minutes ago in UTC; 8h10m in Shanghai
	for _, src := range []Source{
		{CIDRs: []string{"10.0.0.5"}, Times: rec, Zone: shanghai, Also: time.UTC},
		{CIDRs: []string{"10.0.0.5"}, Times: rec, Zone: time.UTC, Also: shanghai},
	} {
		cands, _ := Read(src, now)
		if len(cands) != 1 || !cands[0].Seen.Equal(now.Add(-10*time.Minute)) {
			t.Fatalf("%v/%v: %+v", src.Zone, src.Also, cands)
		}
	}
}
