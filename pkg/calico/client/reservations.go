package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	calicoset "github.com/projectcalico/api/pkg/client/clientset_generated/clientset"
	typedv3 "github.com/projectcalico/api/pkg/client/clientset_generated/clientset/typed/projectcalico/v3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/reserve"
)

// MetadataAnnotation is where crd.projectcalico.org/v1 keeps an object's
// v3 labels and annotations as JSON; native v3 objects have none.
const MetadataAnnotation = "projectcalico.org/metadata"

// Reservations is the IPReservation client on projectcalico.org/v3.
type Reservations struct {
	c typedv3.IPReservationInterface
}

// New is a client on cfg's API server.
func New(cfg *rest.Config) (*Reservations, error) {
	cs, err := calicoset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("projectcalico.org/v3 client: %w", err)
	}
	return NewOn(cs.ProjectcalicoV3().IPReservations()), nil
}

// NewOn is a client on c.
func NewOn(c typedv3.IPReservationInterface) *Reservations { return &Reservations{c: c} }

func (r *Reservations) Create(ctx context.Context, res *apiv3.IPReservation, _ options.SetOptions) (*apiv3.IPReservation, error) {
	out, err := r.c.Create(ctx, prepare(res), metav1.CreateOptions{})
	return readable(out, translate(err, res.Name))
}

func (r *Reservations) Update(ctx context.Context, res *apiv3.IPReservation, _ options.SetOptions) (*apiv3.IPReservation, error) {
	out, err := r.c.Update(ctx, prepare(res), metav1.UpdateOptions{})
	return readable(out, translate(err, res.Name))
}

func (r *Reservations) Delete(ctx context.Context, name string, opts options.DeleteOptions) (*apiv3.IPReservation, error) {
	del := metav1.DeleteOptions{}
	if opts.ResourceVersion != "" || opts.UID != nil {
		del.Preconditions = &metav1.Preconditions{UID: opts.UID}
		if opts.ResourceVersion != "" {
			del.Preconditions.ResourceVersion = &opts.ResourceVersion
		}
	}
	return nil, translate(r.c.Delete(ctx, name, del), name)
}

func (r *Reservations) Get(ctx context.Context, name string, opts options.GetOptions) (*apiv3.IPReservation, error) {
	out, err := r.c.Get(ctx, name, metav1.GetOptions{ResourceVersion: opts.ResourceVersion})
	return readable(out, translate(err, name))
}

func (r *Reservations) List(ctx context.Context, opts options.ListOptions) (*apiv3.IPReservationList, error) {
	if opts.Name != "" { // the store never asks for one by name; say so rather than list all
		return nil, fmt.Errorf("projectcalico.org/v3 IPReservation list by name %q is not supported", opts.Name)
	}
	out, err := r.c.List(ctx, metav1.ListOptions{ResourceVersion: opts.ResourceVersion})
	if err != nil {
		return nil, translate(err, "")
	}
	// One object that does not read must not hide every other: it is left
	// out and said (Skipped), as libcalico-go's v1 list skips one it cannot
	// convert.
	var skipped skippedError
	items := out.Items[:0]
	for _, it := range out.Items {
		if err := fromV1Form(&it.ObjectMeta); err != nil {
			skipped = append(skipped, reserve.Unreadable{Object: it.Name, Addresses: len(it.Spec.ReservedCIDRs), Err: err})
			continue
		}
		items = append(items, it)
	}
	out.Items = items
	if len(skipped) > 0 {
		return out, skipped
	}
	return out, nil
}

// skippedError is a List's answer beside the objects it read: those it
// left out (calicostore.PartialList).
type skippedError []reserve.Unreadable

func (e skippedError) Error() string {
	var b strings.Builder
	for i, u := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "IPReservation %s: %v", u.Object, u.Err)
	}
	return b.String()
}

func (e skippedError) Skipped() []reserve.Unreadable { return e }

// prepare is what goes on the wire: the kind and group are the native
// CRD's, whatever the caller's object says.
func prepare(res *apiv3.IPReservation) *apiv3.IPReservation {
	out := res.DeepCopy()
	out.APIVersion, out.Kind = apiv3.GroupVersionCurrent, apiv3.KindIPReservation
	return out
}

func readable(res *apiv3.IPReservation, err error) (*apiv3.IPReservation, error) {
	if err != nil {
		return nil, err
	}
	if err := fromV1Form(&res.ObjectMeta); err != nil {
		return nil, fmt.Errorf("IPReservation %s: %w", res.Name, err)
	}
	return res, nil
}

// fromV1Form reads an object whose metadata is still in the v1 form (the
// labels and annotations as JSON in MetadataAnnotation, as a copy of a v1
// object carries them) as a native one: real labels and annotations.
func fromV1Form(m *metav1.ObjectMeta) error {
	raw, ok := m.Annotations[MetadataAnnotation]
	if !ok {
		return nil
	}
	var v1 metav1.ObjectMeta
	if err := json.Unmarshal([]byte(raw), &v1); err != nil {
		return fmt.Errorf("annotation %s does not decode: %w", MetadataAnnotation, err)
	}
	labels := maps.Clone(v1.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, m.Labels) // real labels win: they are what a selector sees
	annotations := maps.Clone(v1.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	for k, v := range m.Annotations {
		if k != MetadataAnnotation {
			annotations[k] = v
		}
	}
	m.Labels, m.Annotations = labels, annotations
	return nil
}

// translate turns the API server's errors into libcalico-go's, which the
// store and the agent's readiness tell apart.
func translate(err error, name string) error {
	return translateFor(apigroup.IPReservation, err, name)
}

// translateFor is translate for any of capo's Calico types: a type that is
// not served is named in the error.
func translateFor(k apigroup.Kind, err error, name string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) && !namesObject(err, name):
		// A 404 that names no object is the resource type not being
		// served: never "absent", which would let capo act on nothing.
		return &apigroup.NotServedError{Group: apigroup.GroupV3, Missing: []string{k.V3}}
	case apierrors.IsNotFound(err):
		return cerrors.ErrorResourceDoesNotExist{Err: err, Identifier: name}
	case apierrors.IsAlreadyExists(err):
		return cerrors.ErrorResourceAlreadyExists{Err: err, Identifier: name}
	case apierrors.IsConflict(err):
		return cerrors.ErrorResourceUpdateConflict{Err: err, Identifier: name}
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err):
		return cerrors.ErrorConnectionUnauthorized{Err: err}
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return cerrors.ErrorDatastoreError{Err: err, Identifier: name}
	}
	return err
}

// namesObject says whether a NotFound is the API server's answer about
// the object: a Status naming it. A type that is not served gets a plain
// 404 page, which client-go turns into a generic NotFound ("the server
// could not find the requested resource") with the body as its cause.
func namesObject(err error, name string) bool {
	var st apierrors.APIStatus
	if name == "" || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	if d == nil || d.Name != name {
		return false
	}
	for _, c := range d.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return false
		}
	}
	return !strings.Contains(st.Status().Message, "could not find the requested resource")
}
