// Package nativev3 runs capo against a kube-apiserver that serves only
// Calico's native projectcalico.org/v3 CRDs, as a Calico install after
// 3.32 has (testbed.NativeV3), and the etcdv3 datastore beside it.
package nativev3

import (
	"os"
	"testing"

	"github.com/capo-net/capo/test/testbed"
)

var bed *testbed.Bed

func TestMain(m *testing.M) {
	os.Exit(testbed.MainWith(m, &bed, testbed.Options{CalicoCRDs: testbed.NativeV3}))
}
