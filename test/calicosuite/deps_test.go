package calicosuite

// The packages Calico's CNI suite imports that capo itself does not: kept
// in capo's go.mod (go mod tidy) so that the suite compiles inside capo's
// module, which Build relies on.
import (
	_ "github.com/onsi/ginkgo"
	_ "github.com/onsi/ginkgo/extensions/table"
	_ "github.com/onsi/ginkgo/reporters"
	_ "github.com/onsi/gomega"
	_ "github.com/onsi/gomega/gexec"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
)
