package install

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/capo-net/capo/pkg/selection"
)

// NodeReport is Check's report with what only the API server can tell: the
// node's pods that will not start while capo-ipam is installed.
type NodeReport struct {
	*Report
	FixedAddressPods           []string   `json:",omitempty"`
	FixedAddressPodsNotChecked string     `json:",omitempty"`
	CalicoAPI                  *CalicoAPI `json:",omitempty"`
}

// CheckNode is Check, plus the node's fixed-address pods when a node is
// named. kube is called only then; a failure to list is reported, not fatal.
func CheckNode(o Options, node string, kube func() (kubernetes.Interface, error)) (*NodeReport, error) {
	rep, err := Check(o)
	if err != nil {
		return nil, err
	}
	full := &NodeReport{Report: rep}
	if rep.IPAMType != "" { // a config capo can serve: would the agent find Calico's types?
		if err := full.checkCalico(kube); err != nil {
			return nil, err
		}
	}
	if node == "" {
		return full, nil
	}
	full.FixedAddressPods, full.FixedAddressPodsNotChecked = fixedAddressPods(node, kube)
	if rep.Installed && len(full.FixedAddressPods) > 0 {
		rep.Problem = fmt.Sprintf("%d pods on this node carry fixed-address annotations the calico plugin rejects under capo-ipam; move them to nodes that are not opted in", len(full.FixedAddressPods))
	}
	return full, nil
}

// fixedAddressPods lists the node's pods carrying Calico's fixed-address
// annotations, or says why it could not.
func fixedAddressPods(node string, newKube func() (kubernetes.Interface, error)) ([]string, string) {
	kube, err := newKube()
	if err != nil {
		return nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err.Error()
	}
	var out []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node {
			continue // the field selector already did this, where the server honours it
		}
		if key := selection.FixedAddress(selection.Of(p)); key != "" {
			out = append(out, p.Namespace+"/"+p.Name+" ("+key+")")
		}
	}
	return out, ""
}

// checkCalico fills CalicoAPI; a type not served, or a group this build
// cannot work in, is the report's problem: capo would hold nothing there.
func (full *NodeReport) checkCalico(kube func() (kubernetes.Interface, error)) error {
	data, err := os.ReadFile(full.Config)
	if err != nil {
		return err
	}
	st, err := Inspect(data)
	if err != nil {
		return err
	}
	var problem string
	full.CalicoAPI, problem = checkCalicoAPI(st, kube)
	if problem != "" && full.Problem == "" {
		full.Problem = problem
	}
	return nil
}
