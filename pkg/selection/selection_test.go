package selection

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

func exists(key string) Selector {
	r, err := labels.NewRequirement(key, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return Selector{Name: key + " exists", Selector: labels.NewSelector().Add(*r)}
}

func TestDecide(t *testing.T) {
	optedIn := &Object{Annotations: map[string]string{NodeAnnotation: Enabled}}
	nsOn := &Object{Labels: map[string]string{NamespaceLabel: Enabled}}
	nsOff := &Object{Labels: map[string]string{"team": "a"}}
	sts := map[string]string{"statefulset.kubernetes.io/pod-name": "redis-0"}
	kafka := map[string]string{"brokerId": "3"}
	plain := map[string]string{"app": "web"}
	sels := []Selector{exists("statefulset.kubernetes.io/pod-name"), exists("brokerId")}
	pod := func(l map[string]string, ann string) *Object {
		o := &Object{Labels: l}
		if ann != "" {
			o.Annotations = map[string]string{PodAnnotation: ann}
		}
		return o
	}
	cases := []struct {
		name          string
		node, ns, pod *Object
		want          Verdict
		rule          string
	}{
		{"node unknown", nil, nsOn, pod(sts, ""), NodeNotOptedIn, "node lacks"},
		{"node not annotated", &Object{}, nsOn, pod(sts, Enabled), NodeNotOptedIn, "node lacks"},
		{"node labelled instead", &Object{Labels: map[string]string{NodeOptInLabel: Enabled}}, nsOn, pod(sts, ""), Selected, "selector"},
		{"node annotated wrong value", &Object{Annotations: map[string]string{NodeAnnotation: "true"}}, nsOn, pod(sts, ""), NodeNotOptedIn, "node lacks"},
		{"statefulset pod in enabled namespace", optedIn, nsOn, pod(sts, ""), Selected, "selector statefulset.kubernetes.io/pod-name exists"},
		{"kafka broker in enabled namespace", optedIn, nsOn, pod(kafka, ""), Selected, "selector brokerId exists"},
		{"plain pod in enabled namespace", optedIn, nsOn, pod(plain, ""), NotSelected, "no configured pod selector"},
		{"statefulset pod in other namespace", optedIn, nsOff, pod(sts, ""), NotSelected, "namespace lacks label"},
		{"annotation opts in anywhere", optedIn, nsOff, pod(plain, Enabled), Selected, "pod annotation"},
		{"annotation opts out", optedIn, nsOn, pod(sts, Disabled), NotSelected, "=disabled"},
		{"unknown pod is reserved", optedIn, nsOff, nil, Selected, "reserving to be safe"},
		{"unknown namespace, matching pod", optedIn, nil, pod(sts, ""), Selected, "namespace unknown"},
		{"unknown namespace, plain pod", optedIn, nil, pod(plain, ""), NotSelected, "no configured pod selector"},
		{"no selectors configured", optedIn, nsOn, pod(sts, ""), NotSelected, "no configured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sels
			if tc.name == "no selectors configured" {
				s = nil
			}
			d := Decide(tc.node, tc.ns, tc.pod, s)
			if d.Verdict != tc.want || !strings.Contains(d.Rule, tc.rule) {
				t.Fatalf("got %+v, want %s with rule containing %q", d, tc.want, tc.rule)
			}
		})
	}
}

func TestFixedAddress(t *testing.T) {
	for ann, want := range map[string]string{"": "", AnnotationIPAddrs: AnnotationIPAddrs, AnnotationIPAddrsNoIPAM: AnnotationIPAddrsNoIPAM} {
		o := &Object{Annotations: map[string]string{}}
		if ann != "" {
			o.Annotations[ann] = `["10.0.0.5"]`
		}
		if got := FixedAddress(o); got != want {
			t.Errorf("%q: %q", ann, got)
		}
	}
	if FixedAddress(nil) != "" {
		t.Fatal("nil pod")
	}
}
