package kubeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// PodExists reads one pod with the kubeconfig: true if it is there, false
// if the API server says it is not; any other answer is an error, which
// capo-ipam takes as "capo may still be there".
func (k Reader) PodExists(ctx context.Context, namespace, name string) (bool, error) {
	api, err := loadKubeconfig(k.Kubeconfig)
	if err != nil {
		return false, err
	}
	path := "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(api.server, "/")+path, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "capo-ipam")
	if api.token != "" {
		req.Header.Set("Authorization", "Bearer "+api.token)
	}
	resp, err := api.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("reading pod %s/%s: API server answered %s: %.200s", namespace, name, resp.Status, body)
}
