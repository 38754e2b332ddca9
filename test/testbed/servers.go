package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// adminToken authenticates the bed's own clients and the CNI plugins as a
// cluster admin, the way calico-node's kubeconfig does on a real node.
const adminToken = "capo-testbed-admin-token"

func startEtcd(sp *spawner, bin, dir string, client int) (*proc, string, error) {
	var err error
	if client == 0 {
		if client, err = freePort(); err != nil {
			return nil, "", err
		}
	}
	peer, err := freePort()
	if err != nil {
		return nil, "", err
	}
	curl := "http://127.0.0.1:" + strconv.Itoa(client)
	purl := "http://127.0.0.1:" + strconv.Itoa(peer)
	p, err := sp.start("etcd", filepath.Join(dir, "etcd.log"), bin,
		"--name=default", "--data-dir="+filepath.Join(dir, "etcd-data"),
		"--listen-client-urls="+curl, "--advertise-client-urls="+curl,
		"--listen-peer-urls="+purl, "--initial-advertise-peer-urls="+purl,
		"--initial-cluster=default="+purl, "--log-level=warn",
		// Test data only: fsync would make every Calico write wait on the disk.
		"--unsafe-no-fsync",
	)
	if err != nil {
		return nil, "", err
	}
	if err := waitHTTP(p, curl+"/health", nil, "", 60*time.Second); err != nil {
		p.stop()
		return nil, "", fmt.Errorf("etcd did not become healthy (log: %s): %w", filepath.Join(dir, "etcd.log"), err)
	}
	return p, curl, nil
}

func startAPIServer(sp *spawner, bin, dir, etcdURL string, pk *pki, o Options) (*proc, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+`,capo-testbed-admin,1,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, "", err
	}
	addr := o.address()
	url := "https://" + net.JoinHostPort(addr, strconv.Itoa(port))
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + addr, "--advertise-address=" + addr, "--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + pk.CertFile, "--tls-private-key-file=" + pk.KeyFile,
		"--token-auth-file=" + tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pk.SAPubFile, "--service-account-signing-key-file=" + pk.SAKeyFile,
		"--service-cluster-ip-range=" + ServiceCIDR, "--allow-privileged=true",
		"--enable-priority-and-fairness=false", "--profiling=false", "--v=1",
	}
	args = append(args, o.apiServerArgs()...)
	p, err := sp.start("kube-apiserver", filepath.Join(dir, "kube-apiserver.log"), append([]string{bin}, args...)...)
	if err != nil {
		return nil, "", err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pk.CAPEM)
	if err := waitHTTP(p, url+"/readyz", pool, adminToken, 120*time.Second); err != nil {
		p.stop()
		return nil, "", fmt.Errorf("kube-apiserver did not become ready (log: %s): %w", filepath.Join(dir, "kube-apiserver.log"), err)
	}
	return p, url, nil
}

func waitHTTP(p *proc, url string, roots *x509.CertPool, token string, limit time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		if p.exited() {
			return fmt.Errorf("%s exited", p.name)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("after %s: %v", limit, last)
}

// writeKubeconfig writes a kubeconfig for the given bearer token.
func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    token: %s
contexts:
- name: testbed
  context: {cluster: testbed, user: user}
current-context: testbed
`, server, filepath.Join(filepath.Dir(path), "ca.crt"), token)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "ca.crt"), caPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(cfg), 0o600)
}
