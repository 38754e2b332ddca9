package apigroup

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func lists(byGV map[string][]string) Resources {
	return func(gv string) (*metav1.APIResourceList, error) {
		names, ok := byGV[gv]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
		}
		rl := &metav1.APIResourceList{GroupVersion: gv}
		for _, n := range names {
			rl.APIResources = append(rl.APIResources, metav1.APIResource{Name: n})
		}
		return rl, nil
	}
}

func TestCheckServed(t *testing.T) {
	v1 := Mode{GroupV1, SourceDiscovery}
	v3 := Mode{GroupV3, SourceEnv}
	all1 := []string{"ipreservations", "ipamblocks", "ipamhandles", "ippools", "ipamconfigs", "blockaffinities", "clusterinformations"}
	all3 := []string{"ipreservations", "ipamblocks", "ipamhandles", "ippools", "ipamconfigurations", "blockaffinities", "clusterinformations"}

	if err := served(lists(map[string][]string{GroupV1: all1}), v1, All); err != nil {
		t.Fatalf("all v1 served: %v", err)
	}
	if err := served(lists(map[string][]string{GroupV3: all3}), v3, All); err != nil {
		t.Fatalf("all v3 served: %v", err)
	}
	// v3 CRDs only, capo in v1: the silent case of a new install.
	err := served(lists(map[string][]string{GroupV3: all3}), v1, All)
	if !IsNotServed(err) || !strings.Contains(err.Error(), "crd.projectcalico.org/v1: ipreservations, ipamblocks") {
		t.Fatalf("v1 not served: %v", err)
	}
	// v1 names in a v3 group: ipamconfigs is not ipamconfigurations.
	err = served(lists(map[string][]string{GroupV3: all1}), v3, All)
	var ns *NotServedError
	if !errors.As(err, &ns) || len(ns.Missing) != 1 || ns.Missing[0] != "ipamconfigurations" {
		t.Fatalf("ipamconfigurations missing: %v", err)
	}
	fail := func(string) (*metav1.APIResourceList, error) { return nil, errors.New("connection refused") }
	if err := served(fail, v1, All); err == nil || IsNotServed(err) {
		t.Fatalf("discovery failure must be its own error: %v", err)
	}
	if err := served(fail, Mode{Source: SourceEtcd}, All); err != nil {
		t.Fatalf("etcd: %v", err)
	}
}
