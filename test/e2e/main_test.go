// Package e2e drives the real Calico CNI chain, with and without capo-ipam,
// against a real etcd and kube-apiserver on both Calico datastores.
package e2e

import (
	"os"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) { os.Exit(testbed.Main(m, &bed)) }

// eachDatastore runs f as a subtest on each Calico datastore.
func eachDatastore(t *testing.T, f func(t *testing.T, ds testbed.Datastore)) {
	for _, ds := range testbed.Datastores {
		t.Run(string(ds), func(t *testing.T) { f(t, ds) })
	}
}

// eachRelease runs f on each Calico datastore with each Calico release's
// calico and calico-ipam binaries (testbed.CalicoReleases).
func eachRelease(t *testing.T, f func(t *testing.T, ds testbed.Datastore, release string)) {
	for _, rel := range testbed.CalicoReleases {
		t.Run("calico-"+rel, func(t *testing.T) {
			eachDatastore(t, func(t *testing.T, ds testbed.Datastore) { f(t, ds, rel) })
		})
	}
}
