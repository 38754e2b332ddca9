package testbed

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Collection names what an informer reads of a resource, not a GET of one
// of its objects, nor another resource's.
func TestCollection(t *testing.T) {
	sets, namespaces := Collection("apps", "statefulsets"), Collection("", "namespaces")
	for _, c := range []struct {
		match  func(*http.Request) bool
		method string
		url    string
		want   bool
	}{
		{sets, "GET", "/apis/apps/v1/statefulsets?limit=500&resourceVersion=0", true},
		{sets, "GET", "/apis/apps/v1/statefulsets?watch=true&resourceVersion=7", true},
		{sets, "GET", "/apis/apps/v1/namespaces/ns/statefulsets", true},
		{sets, "GET", "/apis/apps/v1/watch/statefulsets", true},
		{sets, "GET", "/apis/apps/v1/namespaces/ns/statefulsets/mq", false},
		{sets, "PATCH", "/apis/apps/v1/namespaces/ns/statefulsets", false},
		{sets, "GET", "/apis/apps.kruise.io/v1beta1/statefulsets", false},
		{sets, "GET", "/apis/apps/v1/replicasets", false},
		{namespaces, "GET", "/api/v1/namespaces?watch=true", true},
		{namespaces, "GET", "/api/v1/namespaces/ns", false},
		{namespaces, "GET", "/api/v1/namespaces/ns/pods", false},
	} {
		if got := c.match(httptest.NewRequest(c.method, c.url, nil)); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.method, c.url, got, c.want)
		}
	}
}
