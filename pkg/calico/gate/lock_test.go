package gate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/capo-net/capo/pkg/calico/apigroup"
)

func clusterInfo(group string, ready bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group, "kind": "ClusterInformation",
		"metadata": map[string]any{"name": "default"},
		"spec":     map[string]any{"datastoreReady": ready},
	}}
	return u
}

// The lock follows ClusterInformation default's datastoreReady in the
// group in force, as Calico's migration sets it, and says so at once.
func TestLockFollowsCalicosClusterInformation(t *testing.T) {
	for _, group := range []string{apigroup.GroupV1, apigroup.GroupV3} {
		t.Run(group, func(t *testing.T) {
			gv, _ := schema.ParseGroupVersion(group)
			gvr := gv.WithResource("clusterinformations")
			dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ClusterInformationList"}, clusterInfo(group, true))
			changed := make(chan struct{}, 10)
			l := NewLock(apigroup.Mode{Group: group, Source: apigroup.SourceDiscovery}, dyn, nil, func() { changed <- struct{}{} })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l.Run(ctx)
			if err := l.err(); err != nil {
				t.Fatalf("unlocked datastore: %v", err)
			}
			if _, err := dyn.Resource(gvr).Update(ctx, clusterInfo(group, false), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return IsLocked(l.err()) }, "the lock")
			if _, err := dyn.Resource(gvr).Update(ctx, clusterInfo(group, true), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return l.err() == nil }, "the unlock")
			if len(changed) < 2 {
				t.Fatalf("%d change callbacks, want one a change", len(changed))
			}
		})
	}
}

// The lock fails closed, and says why: before its first answer, and while
// there is no ClusterInformation default (Calico's own CNI plugin refuses
// to work then too). One without datastoreReady is not locked, as
// Calico's migration reads it.
func TestLockWithoutClusterInformationSaysSo(t *testing.T) {
	l := NewLock(apigroup.Mode{Group: apigroup.GroupV1, Source: apigroup.SourceEnv}, nil, nil, nil)
	if err := l.err(); !IsLocked(err) || !strings.Contains(err.Error(), "has not read Calico's ClusterInformation default") {
		t.Fatalf("before the first answer: %v", err)
	}
	l.set(nil)
	if err := l.err(); !IsLocked(err) || !strings.Contains(err.Error(), "ClusterInformation default does not exist") {
		t.Fatalf("absent: %v", err)
	}
	f, tr := false, true
	l.set(&f)
	if !IsLocked(l.err()) {
		t.Fatal("datastoreReady false is not a lock")
	}
	l.set(&tr)
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// Watched, a ClusterInformation without datastoreReady is not locked, and
// one deleted is absent.
func TestLockWatchReadsAnUnsaidFieldAsUnlocked(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "clusterinformations"}
	ci := clusterInfo(apigroup.GroupV1, true)
	unstructured.RemoveNestedField(ci.Object, "spec", "datastoreReady")
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ClusterInformationList"}, ci)
	l := NewLock(apigroup.Mode{Group: apigroup.GroupV1, Source: apigroup.SourceDiscovery}, dyn, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Run(ctx)
	waitFor(t, func() bool { return l.err() == nil }, "unlocked")
	if err := dyn.Resource(gvr).Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { e := new(LockedError); return errors.As(l.err(), &e) && e.Absent }, "absent")
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("%s was not seen in 5 s", what)
}

// While its watch cannot answer (cut, or a list failed and the reflector
// backs off), the lock reads ClusterInformation itself rather than refuse
// every write: a read that answers is as good as the watch, for a moment;
// one that fails too leaves capo unable to tell, and writing nothing.
func TestLockReadsThroughWhileItsWatchCannotAnswer(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "clusterinformations"}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ClusterInformationList"})
	f, tr := false, true
	var answer *bool
	var readErr error
	reads := 0
	l := NewLock(apigroup.Mode{Group: apigroup.GroupV1, Source: apigroup.SourceDiscovery}, dyn, func(context.Context) (*bool, error) {
		reads++
		return answer, readErr
	}, nil)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	l.set(&tr)
	if err := l.err(); err != nil || reads != 0 {
		t.Fatalf("watched and unlocked: %v after %d reads", err, reads)
	}

	l.unfollow(errors.New("watch cut"))
	answer = &tr
	if err := l.err(); err != nil {
		t.Fatalf("watch cut, ClusterInformation read unlocked: %v", err)
	}
	if err := l.err(); err != nil || reads != 1 {
		t.Fatalf("within the read's second: %v after %d reads, want the one", err, reads)
	}

	now = now.Add(2 * time.Second)
	answer = &f
	if e := new(LockedError); !errors.As(l.err(), &e) || e.Unfollowed != nil || e.Absent || reads != 2 {
		t.Fatalf("read locked: %v after %d reads", e, reads)
	}

	now = now.Add(2 * time.Second)
	answer = nil
	if e := new(LockedError); !errors.As(l.err(), &e) || !e.Absent {
		t.Fatalf("read absent: %v", e)
	}

	now = now.Add(2 * time.Second)
	readErr = errors.New("connection refused")
	err := l.err()
	if e := new(LockedError); !errors.As(err, &e) || e.Unfollowed == nil ||
		!strings.Contains(err.Error(), "watch cut") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("watch and read both failing: %v", err)
	}

	l.set(&tr) // the watch delivers again
	readErr, reads = nil, 0
	if err := l.err(); err != nil || reads != 0 {
		t.Fatalf("watch back: %v after %d reads", err, reads)
	}

	// Without a way to read, a cut watch is as good as locked, as before.
	bare := NewLock(apigroup.Mode{Group: apigroup.GroupV1, Source: apigroup.SourceDiscovery}, dyn, nil, nil)
	bare.set(&tr)
	bare.unfollow(errors.New("watch cut"))
	if e := new(LockedError); !errors.As(bare.err(), &e) || e.Unfollowed == nil {
		t.Fatalf("no read: %v", bare.err())
	}
}
