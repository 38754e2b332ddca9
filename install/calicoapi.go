package install

import (
	"context"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// CalicoAPI is what check found about the API group Calico keeps its
// resources in: the mode capo would run in on this node, or why it cannot.
type CalicoAPI struct {
	Group      string `json:",omitempty"`
	Source     string `json:",omitempty"`
	NotChecked string `json:",omitempty"`
}

// checkCalicoAPI decides the group as the agent on this node would
// (CALICO_API_GROUP, the conflist's calico_api_group, discovery) and
// reports a problem when a type capo touches is not served there or this
// build cannot work in it: the agent would refuse to be Ready for it.
func checkCalicoAPI(st *State, newKube func() (kubernetes.Interface, error)) (*CalicoAPI, string) {
	if st.Etcd && os.Getenv("DATASTORE_TYPE") != "kubernetes" {
		return &CalicoAPI{Source: apigroup.SourceEtcd}, ""
	}
	kube, err := newKube()
	if err != nil {
		return &CalicoAPI{NotChecked: err.Error()}, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := apigroup.Verify(ctx, kube.Discovery(), false, st.CalicoAPIGroup)
	rep := &CalicoAPI{Group: m.Group, Source: m.Source}
	if err != nil {
		return rep, err.Error()
	}
	return rep, ""
}
