package config

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func configMap(yaml string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capo-system", Name: "capo-config"}, Data: map[string]string{ConfigMapKey: yaml}}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Nothing may be released on the strength of the defaults a process starts
// with while the operator's ConfigMap says otherwise: an invalid one at
// start leaves the config not loaded until it is fixed.
func TestLoadedOnlyOnTheOperatorsConfig(t *testing.T) {
	valid := "apiVersion: config.capo.io/v1\nkind: CapoConfig\nipReserveTime: 24h\nipReserveMaxCount: 5000\n"
	cases := map[string]struct {
		objects []*corev1.ConfigMap
		loaded  bool
		ttl     time.Duration
	}{
		"a valid ConfigMap":      {[]*corev1.ConfigMap{configMap(valid)}, true, 24 * time.Hour},
		"no ConfigMap: defaults": {nil, true, Default().IPReserveTime},
		"invalid at start":       {[]*corev1.ConfigMap{configMap("ipReserveTime: soon\n")}, false, Default().IPReserveTime},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientset()
			for _, cm := range tc.objects {
				if _, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := NewHolder(Default())
			synced := Watch(ctx, kube, "capo-system", "capo-config", h, func(error) {})
			waitUntil(t, "the watch synced", synced)
			time.Sleep(100 * time.Millisecond) // handlers run after the sync
			if h.Loaded() != tc.loaded || h.Get().IPReserveTime != tc.ttl {
				t.Fatalf("loaded %v ttl %s, want %v %s", h.Loaded(), h.Get().IPReserveTime, tc.loaded, tc.ttl)
			}
			if tc.loaded {
				return
			}
			if _, err := kube.CoreV1().ConfigMaps("capo-system").Update(ctx, configMap(valid), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the fixed config loaded", func() bool { return h.Loaded() && h.Get().IPReserveTime == 24*time.Hour })
		})
	}
}
