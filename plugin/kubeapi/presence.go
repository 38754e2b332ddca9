package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// PodExists reads one pod with the kubeconfig: true if it is there, false
// if the API server says it is not; any other answer is an error, which
// capo-ipam takes as "capo may still be there".
func (k Reader) PodExists(ctx context.Context, namespace, name string) (bool, error) {
	api, err := loadKubeconfig(k.Kubeconfig)
	if err != nil {
		return false, err
	}
	resp, body, err := api.get(ctx, "/api/v1/namespaces/"+url.PathEscape(namespace)+"/pods/"+url.PathEscape(name), 64<<10)
	if err != nil {
		return false, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("reading pod %s/%s: API server answered %s: %.200s", namespace, name, resp.Status, body)
}

// NodeOptedIn reads the Node with the kubeconfig and says whether it still
// carries capo's opt-in (selection.NodeOptedIn). A node the API server does
// not have, or any answer but the Node, is an error: capo-ipam then keeps
// capo, as for anything it cannot establish.
func (k Reader) NodeOptedIn(ctx context.Context, name string) (bool, error) {
	api, err := loadKubeconfig(k.Kubeconfig)
	if err != nil {
		return false, err
	}
	resp, body, err := api.get(ctx, "/api/v1/nodes/"+url.PathEscape(name), 4<<20)
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("reading node %s: API server answered %s: %.200s", name, resp.Status, body)
	}
	var node struct {
		Metadata struct {
			Name        string            `json:"name"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &node); err != nil || node.Metadata.Name != name {
		return false, fmt.Errorf("reading node %s: the API server's answer is not that Node (%v)", name, err)
	}
	return optedIn(node.Metadata.Labels, node.Metadata.Annotations), nil
}

// optedIn is selection.NodeOptedIn, spelled out here so that capo-ipam-kube
// links no apimachinery (presence_test.go holds the two equal).
func optedIn(labels, annotations map[string]string) bool {
	return annotations["capo.io/ip-reserve"] == "enabled" || labels["capo.io/ip-reserve"] == "enabled"
}
