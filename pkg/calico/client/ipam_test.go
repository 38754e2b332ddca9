package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cipam "github.com/projectcalico/calico/libcalico-go/lib/ipam"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/calico/apigroup"
	"github.com/capo-net/capo/pkg/calico/ipam"
)

// objects is what the test API server serves, by path under
// /apis/projectcalico.org/v3/; served lists the resource types it serves.
var objects = map[string]string{
	"ippools": `{"items":[
		{"metadata":{"name":"v4"},"spec":{"cidr":"10.0.0.0/24","blockSize":30}},
		{"metadata":{"name":"v6"},"spec":{"cidr":"fd00::/120"}}]}`,
	// node-a's block, of which node-b borrowed ordinal 3.
	"ipamblocks/10-0-0-4-30": `{"metadata":{"name":"10-0-0-4-30"},"spec":{"cidr":"10.0.0.4/30","affinity":"host:node-a",
		"allocations":[0,null,0,1],"unallocated":[1],"attributes":[
		{"handle_id":"k8s-pod-network.a","secondary":{"namespace":"db","pod":"pg-0","node":"node-a"}},
		{"handle_id":"k8s-pod-network.b","secondary":{"namespace":"db","pod":"pg-1","node":"node-b"}}]}}`,
	"ipamblocks/fd00--40-122": `{"metadata":{"name":"fd00--40-122"},"spec":{"cidr":"fd00::40/122","affinity":"host:node-a",
		"allocations":[null,null,0],"unallocated":[0,1],"attributes":[
		{"handle_id":"k8s-pod-network.c","secondary":{"namespace":"db","pod":"pg-2","node":"node-a"}}]}}`,
	// As Calico 3.33+ releases under ipCooldownSeconds: ordinal 1 (pg-3's)
	// points at an attribute of only releasedAt; ordinal 2 is still pg-4's.
	"ipamblocks/10-0-0-12-30": `{"metadata":{"name":"10-0-0-12-30"},"spec":{"cidr":"10.0.0.12/30","affinity":"host:node-a",
		"allocations":[null,1,2,null],"unallocated":[0,3],"attributes":[
		{"handle_id":"k8s-pod-network.d","secondary":{"namespace":"db","pod":"pg-3","node":"node-a"}},
		{"releasedAt":"2026-11-27T10:00:00Z"},
		{"handle_id":"k8s-pod-network.e","secondary":{"namespace":"db","pod":"pg-4","node":"node-a"}}]}}`,
	"ipamhandles/k8s-pod-network.a": `{"metadata":{"name":"k8s-pod-network.a"},"spec":{"handleID":"k8s-pod-network.a","block":{"10.0.0.4/30":2,"10.0.0.200/30":1}}}`,
	"ipamconfigurations/default":    `{"metadata":{"name":"default"},"spec":{"strictAffinity":true,"ipCooldownSeconds":30}}`,
}

func server(t *testing.T, served ...string) *IPAM {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, "/apis/projectcalico.org/v3/")
		resource, name, _ := strings.Cut(rest, "/")
		if !slices.Contains(served, resource) {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		body, ok := objects[rest]
		if !ok && name == "" {
			body, ok = `{"items":[]}`, true
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonNotFound, Code: 404, Message: resource + ` "` + name + `" not found`,
				Details: &metav1.StatusDetails{Name: name, Group: "projectcalico.org", Kind: resource},
			})
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return NewIPAM(cs.CoreV1().RESTClient())
}

var allServed = []string{"ippools", "ipamblocks", "ipamhandles", "ipamconfigurations"}

func TestAssignmentAttributes(t *testing.T) {
	c := server(t, allServed...)
	for _, tc := range []struct {
		name, addr, handle, pod, node string
		free                          bool
	}{
		{name: "allocated", addr: "10.0.0.4", handle: "k8s-pod-network.a", pod: "pg-0", node: "node-a"},
		{name: "two addresses one handle", addr: "10.0.0.6", handle: "k8s-pod-network.a", pod: "pg-0", node: "node-a"},
		{name: "free ordinal", addr: "10.0.0.5", free: true},
		{name: "borrowed from another node's block", addr: "10.0.0.7", handle: "k8s-pod-network.b", pod: "pg-1", node: "node-b"},
		{name: "no block yet", addr: "10.0.0.9", free: true},
		{name: "no pool", addr: "192.168.0.1", free: true},
		{name: "IPv6 allocated", addr: "fd00::42", handle: "k8s-pod-network.c", pod: "pg-2", node: "node-a"},
		{name: "IPv6 free", addr: "fd00::41", free: true},
		{name: "IPv6 past the allocations", addr: "fd00::7f", free: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs, handle, err := c.GetAssignmentAttributes(context.Background(), cnet.IP{IP: net.ParseIP(tc.addr)})
			checkAssignmentIn(t, c, tc.addr, attrs, handle, err)
			if tc.free {
				if !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
					t.Fatalf("free address read as %v %v %v", attrs, handle, err)
				}
				return
			}
			if err != nil || handle == nil || *handle != tc.handle || attrs[cipam.AttributePod] != tc.pod || attrs[cipam.AttributeNode] != tc.node {
				t.Fatalf("got %v %v %v", attrs, handle, err)
			}
		})
	}
}

// checkAssignmentIn reads addr in the block its pools give
// (ipam.BlockOf) and wants what GetAssignmentAttributes answered.
func checkAssignmentIn(t *testing.T, c *IPAM, addr string, attrs map[string]string, handle *string, err error) {
	t.Helper()
	pools, perr := c.Pools(context.Background())
	if perr != nil {
		t.Fatal(perr)
	}
	ip := netip.MustParseAddr(addr)
	block, ok := ipam.BlockOf(ip, pools)
	if !ok {
		if !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
			t.Fatalf("%s is in no pool, yet read as %v %v %v", addr, attrs, handle, err)
		}
		return
	}
	a, h, err2 := c.AssignmentIn(context.Background(), block, ip)
	if fmt.Sprint(a, deref(h), errors.As(err2, new(cerrors.ErrorResourceDoesNotExist))) != fmt.Sprint(attrs, deref(handle), errors.As(err, new(cerrors.ErrorResourceDoesNotExist))) {
		t.Fatalf("%s in block %s: %v %v %v; GetAssignmentAttributes: %v %v %v", addr, block, a, deref(h), err2, attrs, deref(handle), err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// An allocation Calico released into its IP cooldown is cooling and
// nobody's: not free, and not an allocation of handle "" (which the
// controller and the agent took for another pod's, and reserved nothing).
func TestCoolingAllocation(t *testing.T) {
	c := server(t, allServed...)
	attrs, handle, err := c.GetAssignmentAttributes(context.Background(), cnet.IP{IP: net.ParseIP("10.0.0.13")})
	var cooling *calico.CoolingError
	if !errors.As(err, &cooling) || !cooling.ReleasedAt.Equal(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("a cooling address read as %v %v %v", attrs, handle, err)
	}
	h, err := ipam.Who(context.Background(), c, netip.MustParseAddr("10.0.0.13"))
	if err != nil || h == nil || !h.Cooling || h.Handle != "" || h.Pod != "" {
		t.Fatalf("who holds a cooling address: %+v %v", h, err)
	}
	pools, err := c.Pools(context.Background())
	block, ok := ipam.BlockOf(netip.MustParseAddr("10.0.0.13"), pools)
	if !ok || err != nil {
		t.Fatalf("10.0.0.13 in no block of %v: %v", pools, err)
	}
	if h, err := ipam.WhoIn(context.Background(), c, block, netip.MustParseAddr("10.0.0.13")); err != nil || h == nil || !h.Cooling || h.Handle != "" || !h.ReleasedAt.Equal(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("who holds a cooling address, in its block %s: %+v %v", block, h, err)
	}
	if h, err := ipam.Who(context.Background(), c, netip.MustParseAddr("10.0.0.14")); err != nil || h == nil || h.Cooling || h.Pod != "pg-4" {
		t.Fatalf("its block's allocated neighbour: %+v %v", h, err)
	}
}

func TestIPsByHandle(t *testing.T) {
	c := server(t, allServed...)
	got, err := c.IPsByHandle(context.Background(), "k8s-pod-network.a")
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, ip := range got {
		s = append(s, ip.String())
	}
	slices.Sort(s)
	if !slices.Equal(s, []string{"10.0.0.4", "10.0.0.6"}) { // the handle's other block is gone
		t.Fatalf("got %v", s)
	}
	if _, err := c.IPsByHandle(context.Background(), "k8s-pod-network.none"); !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("unknown handle: %v", err)
	}
}

func TestNotServedIsAnError(t *testing.T) {
	c := server(t, "ippools", "ipamhandles", "ipamconfigurations") // no ipamblocks
	_, _, err := c.GetAssignmentAttributes(context.Background(), cnet.IP{IP: net.ParseIP("10.0.0.4")})
	var ns *apigroup.NotServedError
	if !errors.As(err, &ns) || ns.Missing[0] != "ipamblocks" {
		t.Fatalf("a type not served read as %v", err)
	}
	if _, err := c.IPsByHandle(context.Background(), "k8s-pod-network.a"); !apigroup.IsNotServed(err) {
		t.Fatalf("handle's blocks: %v", err)
	}
	if _, err := server(t).settings(context.Background()); !apigroup.IsNotServed(err) {
		t.Fatalf("config: %v", err)
	}
	if _, err := server(t, "ippools").GetUtilization(context.Background(), cipam.GetUtilizationArgs{}); !apigroup.IsNotServed(err) {
		t.Fatalf("utilization: %v", err)
	}
}

func TestIPAMConfig(t *testing.T) {
	cfg, err := server(t, allServed...).settings(context.Background())
	if err != nil || !cfg.StrictAffinity || cfg.Cooldown != 30*time.Second {
		t.Fatalf("got %+v %v", cfg, err)
	}
	saved := objects["ipamconfigurations/default"]
	delete(objects, "ipamconfigurations/default")
	defer func() { objects["ipamconfigurations/default"] = saved }()
	if cfg, err := server(t, allServed...).settings(context.Background()); err != nil || *cfg != (ipamSettings{}) {
		t.Fatalf("absent: %+v %v", cfg, err)
	}
}

func TestUtilization(t *testing.T) {
	objects["ipamblocks"] = `{"items":[` + objects["ipamblocks/10-0-0-4-30"] + `,` + objects["ipamblocks/fd00--40-122"] + `]}`
	defer delete(objects, "ipamblocks")
	u, err := server(t, allServed...).GetUtilization(context.Background(), cipam.GetUtilizationArgs{})
	if err != nil || len(u) != 3 {
		t.Fatalf("got %v %v", u, err)
	}
	v4, v6 := u[0], u[1]
	if v4.Name != "v4" || len(v4.Blocks) != 1 || v4.Blocks[0].Capacity != 4 || v4.Blocks[0].Available != 1 {
		t.Fatalf("v4: %+v", v4)
	}
	if v6.Name != "v6" || len(v6.Blocks) != 1 || v6.Blocks[0].Capacity != 64 || v6.Blocks[0].Available != 2 {
		t.Fatalf("v6: %+v", v6)
	}
}
