package controller

import (
	"log/slog"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/caliconode"
	"github.com/capo-net/capo/pkg/reserve"
)

// Calico's allocation attributes name a pod by namespace and name, not by
// incarnation: a StatefulSet member's successor has the same name, and may
// have been given its predecessor's address back. The controller therefore
// settles which incarnation an allocation is by its sandbox (the handle's
// container ID), never by the pod object that has the name now.

// handleSandbox is the container ID of a Calico handle
// ("<network>.<container ID>"), shortened as entries keep it.
func handleSandbox(handle string) string {
	i := strings.LastIndexByte(handle, '.')
	if i < 0 {
		return ""
	}
	return reserve.SandboxOf(handle[i+1:])
}

// ofIncarnation settles whether h, an allocation under e's pod name, is the
// incarnation e was made for, and returns e naming that sandbox. Otherwise
// it says why not. Where the allocation's incarnation cannot be known (no
// annotations to compare, and another incarnation of the name exists), e
// is kept, so that nothing is freed unreserved, with no pod UID: it says
// that the incarnation is not known (it stays the member's, by its owner).
func (c *coverer) ofIncarnation(e reserve.Entry, h *calico.Holder) (reserve.Entry, string) {
	sb := handleSandbox(h.Handle)
	if e.Sandbox != "" {
		if sb == e.Sandbox {
			return e, ""
		}
		return e, "another sandbox of the pod's name holds it now"
	}
	cur := c.caches.pod(e.Namespace, e.Pod)
	switch {
	case cur == nil || string(cur.UID) == e.PodUID:
		if cur != nil && !terminated(cur) && reserve.SandboxOf(cur.Annotations[caliconode.ContainerIDAnnotation]) == sb {
			return e, "the pod's running sandbox holds it"
		}
	case reserve.SandboxOf(cur.Annotations[caliconode.ContainerIDAnnotation]) == sb || hasIP(cur, e.IP):
		return e, "a later incarnation of the pod holds it"
	default:
		slog.Warn("reserving an address whose incarnation cannot be told: another incarnation of the pod exists and Calico's annotations do not say which sandbox was whose; the entry names no pod UID",
			"ip", e.IP, "pod", e.Namespace+"/"+e.Pod, "handle", h.Handle)
		e.PodUID = ""
	}
	e.Sandbox = sb
	return e, ""
}

func hasIP(p *corev1.Pod, ip string) bool {
	for _, a := range podIPs(p) {
		if a.String() == ip {
			return true
		}
	}
	return false
}
