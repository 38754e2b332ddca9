package testbed

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// ServiceCIDR is the API server's service range; its first address is the
// in-cluster `kubernetes` Service.
const ServiceCIDR = "10.96.0.0/16"

// KubernetesServiceIP is that first address, which in-cluster clients dial.
var KubernetesServiceIP = net.IPv4(10, 96, 0, 1)

// Options change how the bed's servers run. The zero value is the bed the
// end-to-end tests use: loopback only, no controllers behind the API server.
type Options struct {
	// Address is where kube-apiserver binds and what it advertises as the
	// `kubernetes` Service's endpoint; a real node needs one its pods can
	// reach (not loopback). Default 127.0.0.1.
	Address net.IP
	// ServiceAccounts turns on the ServiceAccount admission plugin, for a
	// bed whose controller-manager creates the default accounts and whose
	// pods get tokens projected by a real kubelet.
	ServiceAccounts bool
	// NoCapoBinaries skips building capo's binaries into the bed's dir and
	// its CNI bin dir: for a bed that runs capo from its image.
	NoCapoBinaries bool
	// EtcdPort is etcd's client port on loopback; 0 takes any free one. A
	// bed alone in its own network namespace can give etcd the port a test
	// suite names (Calico's own CNI suite dials port 2379).
	EtcdPort int
	// CalicoCRDs is NativeV3 for a bed whose Kubernetes datastore has only
	// Calico's projectcalico.org/v3 CRDs (V3CRDsDir); "" is the pinned
	// module's crd.projectcalico.org/v1 CRDs. The etcdv3 datastore is the
	// same either way.
	CalicoCRDs string
}

func (o Options) address() string {
	if o.Address == nil {
		return "127.0.0.1"
	}
	return o.Address.String()
}

// serverIPs are the extra addresses the serving certificate must name.
func (o Options) serverIPs() []net.IP {
	if o.Address == nil {
		return nil
	}
	return []net.IP{o.Address, KubernetesServiceIP}
}

func (o Options) apiServerArgs() []string {
	var args []string
	if !o.ServiceAccounts {
		// No controller-manager runs here to create default service accounts.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	if o.Address != nil {
		// kubectl logs/exec reach the kubelet at the node's InternalIP.
		args = append(args, "--kubelet-preferred-address-types=InternalIP")
	}
	return args
}

// CAFile is the cluster CA's certificate (it signs the API server's).
func (b *Bed) CAFile() string { return b.pki.CAFile }

// ServiceAccountKeyFile is the key that signs service account tokens; the
// controller-manager's token controller needs it.
func (b *Bed) ServiceAccountKeyFile() string { return b.pki.SAKeyFile }

// AdminToken is the bearer token of the bed's cluster admin.
func (b *Bed) AdminToken() string { return adminToken }

// WriteKubeconfig writes an admin kubeconfig at path, for the components a
// test runs itself (a kubelet, a controller-manager).
func (b *Bed) WriteKubeconfig(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return writeKubeconfig(path, b.APIServerURL, b.pki.CAPEM, adminToken)
}

// Process is a program a test runs through the bed: it dies with the test
// process, and Stop ends its whole process group.
type Process struct{ p *proc }

// Spawn starts argv with its output appended to logPath.
func (b *Bed) Spawn(name, logPath string, argv ...string) (*Process, error) {
	p, err := b.sp.start(name, logPath, argv...)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Stop sends SIGTERM, then SIGKILL after 10 s, and waits.
func (p *Process) Stop() { p.p.stop() }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.p.exited() }

// Pid is the process id.
func (p *Process) Pid() int { return p.p.cmd.Process.Pid }

// WaitHTTP waits until url answers 200 (TLS verified against the bed's CA,
// with the admin token when token is set), or the process exits.
func (b *Bed) WaitHTTP(p *Process, url string, token bool, limit time.Duration) error {
	tok := ""
	if token {
		tok = adminToken
	}
	if err := waitHTTP(p.p, url, b.caPool(), tok, limit); err != nil {
		return fmt.Errorf("%s: %w", p.p.name, err)
	}
	return nil
}

func (b *Bed) caPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.pki.CAPEM)
	return pool
}
