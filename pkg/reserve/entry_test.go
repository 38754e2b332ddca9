package reserve

import (
	"testing"
)

func TestIsSandbox(t *testing.T) {
	e := Entry{Sandbox: SandboxOf("0123456789abcdef99")}
	for handle, want := range map[string]bool{
		"k8s-pod-network.0123456789abcdef99": true,
		"k8s-pod-network.0123456789abcdef00": true, // the same 16 digits: one sandbox
		"k8s-pod-network.1123456789abcdef99": false,
		"0123456789abcdef99":                 false,
	} {
		if got := e.IsSandbox(handle); got != want {
			t.Errorf("%s: %v, want %v", handle, got, want)
		}
	}
	if (Entry{}).IsSandbox("k8s-pod-network.") {
		t.Error("an entry without a sandbox matches no handle")
	}
}

type recordedOwner struct {
	kind, name, uid string
	ok              bool
}

func (r recordedOwner) RecordedOwner() (kind, name, uid string, ok bool) {
	return r.kind, r.name, r.uid, r.ok
}

// SetOwner takes the controller recorded at ADD only for an entry that has
// none from its pod object, and only if one was recorded.
func TestSetOwner(t *testing.T) {
	var e Entry
	e.SetOwner(nil)
	e.SetOwner(recordedOwner{kind: "StatefulSet", name: "web", uid: "u1"})
	if e.OwnerKind != "" {
		t.Fatalf("an unrecorded owner was taken: %+v", e)
	}
	e.SetOwner(recordedOwner{kind: "StatefulSet", name: "web", uid: "u1", ok: true})
	if e.OwnerKind != "StatefulSet" || e.OwnerName != "web" || e.OwnerUID != "u1" {
		t.Fatalf("recorded owner not taken: %+v", e)
	}
	e.SetOwner(recordedOwner{kind: "StatefulSet", name: "db", uid: "u2", ok: true})
	if e.OwnerUID != "u1" {
		t.Fatalf("the pod object's owner was overwritten: %+v", e)
	}
}
