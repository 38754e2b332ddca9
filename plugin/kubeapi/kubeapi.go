// Package kubeapi reads a pod's and its namespace's annotations from the
// API server with the calico plugin's own kubeconfig, as the plugin does.
// It is capo-ipam-kube's, the helper capo-ipam runs only when the node's
// agent cannot answer: it links net/http and crypto/tls, which capo-ipam
// itself does not, so that every pod's start does not pay for them.
package kubeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/capo-net/capo/pkg/wire"
)

// Reader reads from the API server with a kubeconfig (the calico plugin's
// kubernetes.kubeconfig). It speaks plain HTTPS rather than linking
// client-go, whose start-up alone would add about 10 ms to each run.
type Reader struct{ Kubeconfig string }

// Get reads the pod's and its namespace's annotations, both at once.
func (k Reader) Get(ctx context.Context, ref wire.PodRef) (*wire.AnnotationsResponse, error) {
	namespace, pod := ref.Namespace, ref.Name
	api, err := loadKubeconfig(k.Kubeconfig)
	if err != nil {
		return nil, err
	}
	var (
		wg            sync.WaitGroup
		nsAnn, podAnn map[string]string
		nsErr, podErr error
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		nsAnn, nsErr = api.annotations(ctx, "/api/v1/namespaces/"+url.PathEscape(namespace))
	}()
	go func() {
		defer wg.Done()
		podAnn, podErr = api.annotations(ctx, "/api/v1/namespaces/"+url.PathEscape(namespace)+"/pods/"+url.PathEscape(pod))
	}()
	wg.Wait()
	if podErr != nil {
		return nil, fmt.Errorf("reading pod %s/%s for Calico's IPAM annotations: %w", namespace, pod, podErr)
	}
	if nsErr != nil {
		return nil, fmt.Errorf("reading namespace %s for Calico's IPAM annotations: %w", namespace, nsErr)
	}
	return &wire.AnnotationsResponse{Namespace: nsAnn, Pod: podAnn}, nil
}

// kubeAPI is an API server and how to authenticate to it.
type kubeAPI struct {
	server string
	token  string
	client *http.Client
}

// get reads path from the API server: the answer's status and up to limit
// bytes of its body.
func (k *kubeAPI) get(ctx context.Context, path string, limit int64) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(k.server, "/")+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "capo-ipam")
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp, body, err
}

func (k *kubeAPI) annotations(ctx context.Context, path string) (map[string]string, error) {
	resp, body, err := k.get(ctx, path, 4<<20)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("API server answered %s: %.200s", resp.Status, body)
	}
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("API server's answer: %w", err)
	}
	return obj.Metadata.Annotations, nil
}

// kubeconfigFile is the part of a kubeconfig Calico's install-cni writes
// and operators use for CNI plugins.
type kubeconfigFile struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Clusters []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server   string `json:"server"`
			CA       string `json:"certificate-authority"`
			CAData   []byte `json:"certificate-authority-data"`
			Insecure bool   `json:"insecure-skip-tls-verify"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token     string          `json:"token"`
			TokenFile string          `json:"tokenFile"`
			Cert      string          `json:"client-certificate"`
			CertData  []byte          `json:"client-certificate-data"`
			Key       string          `json:"client-key"`
			KeyData   []byte          `json:"client-key-data"`
			Exec      json.RawMessage `json:"exec"`
			Provider  json.RawMessage `json:"auth-provider"`
		} `json:"user"`
	} `json:"users"`
}

func loadKubeconfig(path string) (*kubeAPI, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	var kc kubeconfigFile
	if err := yaml.Unmarshal(raw, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if len(kc.Clusters) == 0 {
		return nil, fmt.Errorf("kubeconfig %s names no cluster", path)
	}
	clusterName, userName := kc.Clusters[0].Name, ""
	if len(kc.Users) > 0 {
		userName = kc.Users[0].Name
	}
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			clusterName, userName = c.Context.Cluster, c.Context.User
		}
	}
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(filepath.Dir(path), p)
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	api := &kubeAPI{}
	for _, c := range kc.Clusters {
		if c.Name != clusterName {
			continue
		}
		api.server = c.Cluster.Server
		tlsConf.InsecureSkipVerify = c.Cluster.Insecure // the operator's own kubeconfig says so
		ca := c.Cluster.CAData
		if ca == nil && c.Cluster.CA != "" {
			if ca, err = os.ReadFile(rel(c.Cluster.CA)); err != nil {
				return nil, fmt.Errorf("kubeconfig %s: certificate-authority: %w", path, err)
			}
		}
		if ca != nil {
			tlsConf.RootCAs = x509.NewCertPool()
			if !tlsConf.RootCAs.AppendCertsFromPEM(ca) {
				return nil, fmt.Errorf("kubeconfig %s: certificate-authority holds no PEM certificate", path)
			}
		}
	}
	if api.server == "" {
		return nil, fmt.Errorf("kubeconfig %s: cluster %q has no server", path, clusterName)
	}
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		if u.User.Exec != nil || u.User.Provider != nil {
			return nil, fmt.Errorf("kubeconfig %s uses an exec or auth-provider plugin, which capo-ipam does not run; give the calico plugin a token or client-certificate kubeconfig, as install-cni writes", path)
		}
		api.token = u.User.Token
		if api.token == "" && u.User.TokenFile != "" {
			b, err := os.ReadFile(rel(u.User.TokenFile))
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s: tokenFile: %w", path, err)
			}
			api.token = strings.TrimSpace(string(b))
		}
		cert, key := u.User.CertData, u.User.KeyData
		if cert == nil && u.User.Cert != "" {
			cert, _ = os.ReadFile(rel(u.User.Cert))
		}
		if key == nil && u.User.Key != "" {
			key, _ = os.ReadFile(rel(u.User.Key))
		}
		if cert != nil || key != nil {
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s: client certificate: %w", path, err)
			}
			tlsConf.Certificates = []tls.Certificate{pair}
		}
	}
	if api.token == "" && len(tlsConf.Certificates) == 0 {
		return nil, errors.New("kubeconfig " + path + " has no token or client certificate for user " + userName)
	}
	api.client = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}}
	return api, nil
}
