package agent

import (
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/capo-net/capo/pkg/selection"
)

// fixedAddressWarner makes a pod with a fixed address on an opted-in node
// impossible to miss: the calico plugin rejects such a pod unless its ipam
// type is literally calico-ipam, before capo is called, so its sandbox never
// starts here. One Warning per pod, on the pod.
type fixedAddressWarner struct {
	recorder record.EventRecorder
	count    func()
	optedIn  func() bool
	mu       sync.Mutex
	warned   map[types.UID]bool
}

// newRecorder records Events as capo-agent of node.
func newRecorder(kube kubernetes.Interface, node string) record.EventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "capo-agent", Host: node})
}

func newFixedAddressWarner(kube kubernetes.Interface, node string, optedIn func() bool, count func()) *fixedAddressWarner {
	return &fixedAddressWarner{
		recorder: newRecorder(kube, node),
		count:    count, optedIn: optedIn, warned: map[types.UID]bool{},
	}
}

func (w *fixedAddressWarner) check(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.DeletionTimestamp != nil || !w.optedIn() {
		return
	}
	key := selection.FixedAddress(selection.Of(p))
	if key == "" {
		return
	}
	w.mu.Lock()
	seen := w.warned[p.UID]
	w.warned[p.UID] = true
	w.mu.Unlock()
	if seen {
		return
	}
	w.count()
	msg := fmt.Sprintf("%s is not honoured on this node: capo-ipam is its IPAM, and the calico plugin accepts fixed addresses only with calico-ipam. Schedule this pod on a node without %s=%s (node affinity on the label %s NotIn [%s]).",
		key, selection.NodeAnnotation, selection.Enabled, selection.NodeOptInLabel, selection.Enabled)
	w.recorder.Event(p, corev1.EventTypeWarning, "FixedAddressOnCapoNode", msg)
	slog.Warn("pod with a fixed address scheduled to an opted-in node", "pod", p.Namespace+"/"+p.Name, "annotation", key)
}

// watch checks every pod of this node as it appears or changes, and all of
// them when the node is opted in.
func (w *fixedAddressWarner) watch(f *informerCluster) {
	_, _ = f.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.check,
		UpdateFunc: func(_, obj any) { w.check(obj) },
	})
	f.onNodeChange(func(*metav1.PartialObjectMetadata) {
		for _, o := range f.pods.GetStore().List() {
			w.check(o)
		}
	})
}
