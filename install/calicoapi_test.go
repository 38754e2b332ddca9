package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

// serve makes kube's discovery serve every type capo touches in group.
func serve(kube *fake.Clientset, group string) {
	rl := &metav1.APIResourceList{GroupVersion: group}
	for _, k := range apigroup.All {
		rl.APIResources = append(rl.APIResources, metav1.APIResource{Name: k.Resource(group)})
	}
	kube.Resources = append(kube.Resources, rl)
}

func TestCheckFailsWhereCalicoTypesAreNotServed(t *testing.T) {
	t.Setenv(apigroup.EnvGroup, "")
	t.Setenv("DATASTORE_TYPE", "")
	cases := []struct {
		name    string
		served  []string
		netconf string // calico_api_group put in the calico plugin
		env     string
		problem string // "" for none
		group   string
	}{
		{"v1 served", []string{apigroup.GroupV1}, "", "", "", apigroup.GroupV1},
		{"nothing served", nil, "", "", "not served in API group crd.projectcalico.org/v1: ipreservations", apigroup.GroupV1},
		{"v3 only: a new install", []string{apigroup.GroupV3}, "", "", "", apigroup.GroupV3},
		{"migration window, conflist says v3", []string{apigroup.GroupV1, apigroup.GroupV3}, apigroup.GroupV3, "", "", apigroup.GroupV3},
		{"env says v3, not served", []string{apigroup.GroupV1}, "", apigroup.GroupV3, "not served in API group projectcalico.org/v3", apigroup.GroupV3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(apigroup.EnvGroup, c.env)
			o := node(t)
			if c.netconf != "" {
				path := filepath.Join(o.CNIConfDir, "10-calico.conflist")
				data, _ := os.ReadFile(path)
				data = []byte(strings.Replace(string(data), `"datastore_type": "kubernetes",`, `"datastore_type": "kubernetes", "calico_api_group": "`+c.netconf+`",`, 1))
				if err := os.WriteFile(path, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			kube := fake.NewClientset()
			for _, g := range c.served {
				serve(kube, g)
			}
			rep, err := CheckNode(o, "", func() (kubernetes.Interface, error) { return kube, nil })
			if err != nil {
				t.Fatal(err)
			}
			if rep.CalicoAPI == nil || rep.CalicoAPI.Group != c.group {
				t.Fatalf("group: %+v, want %s", rep.CalicoAPI, c.group)
			}
			if (c.problem == "") != (rep.Problem == "") || !strings.Contains(rep.Problem, c.problem) {
				t.Fatalf("problem %q, want one with %q", rep.Problem, c.problem)
			}
		})
	}
}
