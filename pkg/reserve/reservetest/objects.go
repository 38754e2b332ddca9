// Package reservetest fakes Calico's datastore for unit tests of the
// reservation store and its users, in memory, with the semantics the
// store's correctness rests on.
package reservetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

var _ calicostore.Objects = (*Objects)(nil)

// Objects is an in-memory IPReservation datastore. Create fails if the name
// is taken; Update is a compare-and-swap on the resource version; Delete
// honours a UID precondition and, like libcalico-go's Kubernetes backend,
// ignores the resource version, unless EtcdDelete asks for the etcdv3
// backend's behaviour (the version is a precondition too).
type Objects struct {
	EtcdDelete bool
	// Before, if set, runs before every call with its verb ("create",
	// "update", "delete", "get", "list") and object name, outside the
	// lock: a test interleaves another writer there, or fails the call.
	Before func(verb, name string) error
	// LoseAnswer, if set, runs after every create and update that was
	// applied, outside the lock; an error it returns is returned in place
	// of the result: the write landed and its answer was lost (a context
	// ended, a connection dropped).
	LoseAnswer func(verb, name string) error

	mu    sync.Mutex
	objs  map[string]*apiv3.IPReservation
	rev   int
	calls map[string]int
}

// NewObjects is an empty datastore.
func NewObjects() *Objects {
	return &Objects{objs: map[string]*apiv3.IPReservation{}, calls: map[string]int{}}
}

func (f *Objects) enter(verb, name string) error {
	if f.Before != nil {
		if err := f.Before(verb, name); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.calls[verb]++
	return nil
}

// Calls counts the calls of one verb so far.
func (f *Objects) Calls(verb string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[verb]
}

// Create stores a new object.
func (f *Objects) Create(_ context.Context, res *apiv3.IPReservation, _ options.SetOptions) (*apiv3.IPReservation, error) {
	out, err := f.create(res)
	return f.answer("create", res.Name, out, err)
}

func (f *Objects) create(res *apiv3.IPReservation) (*apiv3.IPReservation, error) {
	if err := f.enter("create", res.Name); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if err := validate(res); err != nil {
		return nil, err
	}
	if _, ok := f.objs[res.Name]; ok {
		return nil, cerrors.ErrorResourceAlreadyExists{Identifier: res.Name, Err: fmt.Errorf("exists")}
	}
	out := res.DeepCopy()
	f.rev++
	out.UID = types.UID("uid-" + strconv.Itoa(f.rev))
	out.ResourceVersion = strconv.Itoa(f.rev)
	out.CreationTimestamp = metav1.Now()
	f.objs[res.Name] = out
	return out.DeepCopy(), nil
}

// answer is a write's result, unless LoseAnswer loses that of one applied.
func (f *Objects) answer(verb, name string, out *apiv3.IPReservation, err error) (*apiv3.IPReservation, error) {
	if err == nil && f.LoseAnswer != nil {
		if lost := f.LoseAnswer(verb, name); lost != nil {
			return nil, lost
		}
	}
	return out, err
}

// Update replaces an object read at its current version.
func (f *Objects) Update(_ context.Context, res *apiv3.IPReservation, _ options.SetOptions) (*apiv3.IPReservation, error) {
	out, err := f.update(res)
	return f.answer("update", res.Name, out, err)
}

func (f *Objects) update(res *apiv3.IPReservation) (*apiv3.IPReservation, error) {
	if err := f.enter("update", res.Name); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	if err := validate(res); err != nil {
		return nil, err
	}
	cur, ok := f.objs[res.Name]
	switch {
	case !ok:
		return nil, cerrors.ErrorResourceDoesNotExist{Identifier: res.Name, Err: fmt.Errorf("not found")}
	case res.ResourceVersion != cur.ResourceVersion || res.UID != "" && res.UID != cur.UID:
		return nil, cerrors.ErrorResourceUpdateConflict{Identifier: res.Name, Err: fmt.Errorf("version %s, stored %s", res.ResourceVersion, cur.ResourceVersion)}
	}
	out := res.DeepCopy()
	f.rev++
	out.UID, out.CreationTimestamp, out.ResourceVersion = cur.UID, cur.CreationTimestamp, strconv.Itoa(f.rev)
	f.objs[res.Name] = out
	return out.DeepCopy(), nil
}

// Delete removes an object; see Objects for what is checked.
func (f *Objects) Delete(_ context.Context, name string, opts options.DeleteOptions) (*apiv3.IPReservation, error) {
	if err := f.enter("delete", name); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	cur, ok := f.objs[name]
	switch {
	case !ok:
		return nil, cerrors.ErrorResourceDoesNotExist{Identifier: name, Err: fmt.Errorf("not found")}
	case opts.UID != nil && *opts.UID != cur.UID,
		f.EtcdDelete && opts.ResourceVersion != "" && opts.ResourceVersion != cur.ResourceVersion:
		return nil, cerrors.ErrorResourceUpdateConflict{Identifier: name, Err: fmt.Errorf("precondition failed")}
	}
	delete(f.objs, name)
	return cur.DeepCopy(), nil
}

// Get reads an object.
func (f *Objects) Get(_ context.Context, name string, _ options.GetOptions) (*apiv3.IPReservation, error) {
	if err := f.enter("get", name); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	cur, ok := f.objs[name]
	if !ok {
		return nil, cerrors.ErrorResourceDoesNotExist{Identifier: name, Err: fmt.Errorf("not found")}
	}
	return cur.DeepCopy(), nil
}

// List reads every object, by name.
func (f *Objects) List(_ context.Context, _ options.ListOptions) (*apiv3.IPReservationList, error) {
	if err := f.enter("list", ""); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	out := &apiv3.IPReservationList{}
	for _, name := range f.namesLocked() {
		out.Items = append(out.Items, *f.objs[name].DeepCopy())
	}
	return out, nil
}

// Names are the objects' names, sorted.
func (f *Objects) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.namesLocked()
}

func (f *Objects) namesLocked() []string {
	names := make([]string, 0, len(f.objs))
	for n := range f.objs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Object is a stored object's name, labels, annotations and CIDRs: what a
// test reads of it, or edits and puts back.
type Object struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	CIDRs       []string
}

// Put stores an object as given, as an operator's edit or an older capo
// would have written it.
func (f *Objects) Put(o Object) {
	res := apiv3.NewIPReservation()
	res.ObjectMeta = metav1.ObjectMeta{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations}
	res.Spec.ReservedCIDRs = o.CIDRs
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.objs[o.Name]; ok {
		res.UID, res.CreationTimestamp = cur.UID, cur.CreationTimestamp
	} else {
		res.UID = types.UID("uid-put-" + strconv.Itoa(f.rev+1))
	}
	f.rev++
	res.ResourceVersion = strconv.Itoa(f.rev)
	f.objs[o.Name] = res
}

// PutFiles stores objects saved as JSON files (name, labels, annotations,
// reservedCIDRs), such as the objects of the per-node layout older capo
// wrote (pkg/reserve/calicostore/internal/layout/testdata).
func (f *Objects) PutFiles(paths ...string) error {
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var o struct {
			Name          string
			Labels        map[string]string
			Annotations   map[string]string
			ReservedCIDRs []string
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		f.Put(Object{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations, CIDRs: o.ReservedCIDRs})
	}
	return nil
}

// Object is a stored object; ok is false if absent.
func (f *Objects) Object(name string) (Object, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.objs[name]
	if !ok {
		return Object{}, false
	}
	return Object{Name: r.Name, Labels: r.Labels, Annotations: r.Annotations, CIDRs: slices.Clone(r.Spec.ReservedCIDRs)}, true
}

// validate refuses what Calico's validator refuses and the store could get
// wrong: a CIDR that does not parse.
func validate(res *apiv3.IPReservation) error {
	for _, c := range res.Spec.ReservedCIDRs {
		if _, _, err := net.ParseCIDR(c); err != nil && net.ParseIP(c) == nil {
			return cerrors.ErrorValidation{ErroredFields: []cerrors.ErroredField{{Name: "Spec.ReservedCIDRs", Value: c, Reason: "not a CIDR"}}}
		}
	}
	return nil
}
