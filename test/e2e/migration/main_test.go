// Package migration runs capo through Calico's migration of its Kubernetes
// datastore from crd.projectcalico.org/v1 to native projectcalico.org/v3,
// with addresses held, a member away to come back and a DEL in flight.
package migration

import (
	"os"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.MainWith(m, &bed, testbed.Options{}))
}
