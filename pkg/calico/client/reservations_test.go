package client

import (
	"context"
	"errors"
	"testing"

	apiv3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	"github.com/projectcalico/api/pkg/client/clientset_generated/clientset/fake"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/reserve"
)

func TestReadsEitherForm(t *testing.T) {
	v1form := apiv3.NewIPReservation()
	v1form.Name = "copied"
	v1form.Labels = map[string]string{"projectcalico.org/x": "kept"}
	v1form.Annotations = map[string]string{
		MetadataAnnotation: `{"labels":{"app.kubernetes.io/managed-by":"capo"},"annotations":{"capo.io/entries":"[]"}}`,
		"other":            "y",
	}
	native := apiv3.NewIPReservation()
	native.Name = "native"
	native.Labels = map[string]string{"app.kubernetes.io/managed-by": "capo"}
	native.Annotations = map[string]string{"capo.io/entries": "[]"}
	r := NewOn(fake.NewSimpleClientset(v1form, native).ProjectcalicoV3().IPReservations())
	l, err := r.List(context.Background(), options.ListOptions{})
	if err != nil || len(l.Items) != 2 {
		t.Fatalf("list: %v %v", l, err)
	}
	for _, o := range l.Items {
		if o.Labels["app.kubernetes.io/managed-by"] != "capo" || o.Annotations["capo.io/entries"] != "[]" || o.Annotations[MetadataAnnotation] != "" {
			t.Fatalf("%s read as %+v", o.Name, o.ObjectMeta)
		}
	}
	got, err := r.Get(context.Background(), "copied", options.GetOptions{})
	if err != nil || got.Labels["projectcalico.org/x"] != "kept" || got.Annotations["other"] != "y" {
		t.Fatalf("get: %+v %v", got, err)
	}
}

func TestErrorsAreLibcalicos(t *testing.T) {
	r := NewOn(fake.NewSimpleClientset().ProjectcalicoV3().IPReservations())
	ctx := context.Background()
	if _, err := r.Get(ctx, "nope", options.GetOptions{}); !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("absent: %v", err)
	}
	res := apiv3.NewIPReservation()
	res.Name = "a"
	if _, err := r.Create(ctx, res, options.SetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(ctx, res, options.SetOptions{}); !errors.As(err, new(cerrors.ErrorResourceAlreadyExists)) {
		t.Fatalf("exists: %v", err)
	}
	// A 404 naming no object: the type is not served.
	notServed := apierrors.NewNotFound(schema.GroupResource{}, "")
	if err := translate(notServed, "a"); !apigroup.IsNotServed(err) {
		t.Fatalf("not served read as %v", err)
	}
	if err := translate(apierrors.NewConflict(schema.GroupResource{}, "a", errors.New("x")), "a"); !errors.As(err, new(cerrors.ErrorResourceUpdateConflict)) {
		t.Fatalf("conflict: %v", err)
	}
}

// What client-go makes of the plain 404 page of a type that is not served.
func TestGeneric404IsNotServed(t *testing.T) {
	err := apierrors.NewGenericServerResponse(404, "get", schema.GroupResource{Group: "projectcalico.org", Resource: "ipreservations"}, "capo-bucket-0", "404 page not found", 0, true)
	if !apigroup.IsNotServed(translate(err, "capo-bucket-0")) {
		t.Fatalf("read as %v", translate(err, "capo-bucket-0"))
	}
}

// One object whose v1-form metadata does not decode is left out and said
// (a calicostore.PartialList); the others are read.
func TestListSkipsAnObjectThatDoesNotRead(t *testing.T) {
	bad := apiv3.NewIPReservation()
	bad.Name = "capo.bucket-03"
	bad.Annotations = map[string]string{MetadataAnnotation: `{"labels":`}
	bad.Spec.ReservedCIDRs = []string{"10.0.0.1/32", "10.0.0.2/32"}
	good := apiv3.NewIPReservation()
	good.Name = "capo.bucket-04"
	r := NewOn(fake.NewSimpleClientset(bad, good).ProjectcalicoV3().IPReservations())
	l, err := r.List(context.Background(), options.ListOptions{})
	var partial interface{ Skipped() []reserve.Unreadable }
	if !errors.As(err, &partial) || l == nil || len(l.Items) != 1 || l.Items[0].Name != good.Name {
		t.Fatalf("list: %+v %v", l, err)
	}
	if s := partial.Skipped(); len(s) != 1 || s[0].Object != bad.Name || s[0].Addresses != 2 || s[0].Err == nil {
		t.Fatalf("skipped: %+v", s)
	}
}
