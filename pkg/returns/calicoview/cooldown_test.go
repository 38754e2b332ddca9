package calicoview

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServing answers the cooldown's paths as an API server would: a body,
// or a status.
func apiServing(t *testing.T, answers *sync.Map) rest.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		a, _ := answers.Load(r.URL.Path)
		switch a := a.(type) {
		case string:
			_, _ = w.Write([]byte(a))
		case int:
			w.WriteHeader(a)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":` + strconv.Itoa(a) + `}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		}
	}))
	t.Cleanup(srv.Close)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return kube.Discovery().RESTClient()
}

func TestReadCooldown(t *testing.T) {
	v1 := "/apis/crd.projectcalico.org/v1/ipamconfigs/default"
	v3 := "/apis/projectcalico.org/v3/ipamconfigurations/default"
	cases := []struct {
		name    string
		answers map[string]any
		want    time.Duration
		err     string
	}{
		{"Kubernetes datastore, set", map[string]any{v1: `{"spec":{"strictAffinity":false,"ipCooldownSeconds":30}}`}, 30 * time.Second, ""},
		{"Kubernetes datastore, unset (a Calico before 3.33)", map[string]any{v1: `{"spec":{"strictAffinity":false}}`}, 0, ""},
		{"v3 served too, the longer counts", map[string]any{v1: `{"spec":{"ipCooldownSeconds":30}}`, v3: `{"spec":{"ipCooldownSeconds":90}}`}, 90 * time.Second, ""},
		{"v3 only, v1 forbidden", map[string]any{v1: http.StatusForbidden, v3: `{"spec":{"ipCooldownSeconds":15}}`}, 15 * time.Second, ""},
		{"neither served (etcdv3)", map[string]any{}, 0, ""},
		{"a body that is not an object", map[string]any{v1: `[1]`}, 0, "decoding"},
		{"the API server failing", map[string]any{v1: http.StatusInternalServerError}, 0, "reading " + v1},
	}
	for _, tc := range cases {
		answers := &sync.Map{}
		for k, v := range tc.answers {
			answers.Store(k, v)
		}
		got, err := ReadCooldown(context.Background(), apiServing(t, answers))
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, %v; want %v, error with %q", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// The cache reads at most once per Every, and keeps the last value through
// a failed read.
func TestCooldownCache(t *testing.T) {
	v1 := "/apis/crd.projectcalico.org/v1/ipamconfigs/default"
	answers := &sync.Map{}
	answers.Store(v1, `{"spec":{"ipCooldownSeconds":30}}`)
	c := &Cooldown{REST: apiServing(t, answers), Every: time.Minute}
	t0 := time.Now()
	if d, err := c.Get(context.Background(), t0); d != 30*time.Second || err != nil {
		t.Fatalf("first read %v %v", d, err)
	}
	answers.Store(v1, `{"spec":{"ipCooldownSeconds":60}}`)
	if d, _ := c.Get(context.Background(), t0.Add(30*time.Second)); d != 30*time.Second {
		t.Fatalf("read again within Every: %v", d)
	}
	if d, _ := c.Get(context.Background(), t0.Add(61*time.Second)); d != 60*time.Second {
		t.Fatalf("not read again after Every: %v", d)
	}
	answers.Store(v1, http.StatusInternalServerError)
	if d, err := c.Get(context.Background(), t0.Add(200*time.Second)); d != 60*time.Second || err == nil {
		t.Fatalf("a failed read: %v %v, want the last value and the error", d, err)
	}
	var none *Cooldown
	if d, err := none.Get(context.Background(), t0); d != 0 || err != nil {
		t.Fatalf("no reader: %v %v", d, err)
	}
}
