package client

import (
	"context"
	"errors"
	"testing"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
)

// The client's reads of the types libcalico-go would read in
// crd.projectcalico.org/v1 go to projectcalico.org/v3.
func TestClientReadsV3(t *testing.T) {
	c := &v3Client{ipam: server(t, append(allServed, "felixconfigurations")...)}
	ctx := context.Background()
	l, err := c.IPPools().List(ctx, options.ListOptions{})
	if err != nil || len(l.Items) != 2 || l.Items[0].Spec.BlockSize != 30 {
		t.Fatalf("pools: %+v %v", l, err)
	}
	cfg, err := ipamReads{v3: c.ipam}.GetIPAMConfig(ctx)
	if err != nil || !cfg.StrictAffinity {
		t.Fatalf("IPAM config: %+v %v", cfg, err)
	}
	if _, err := c.FelixConfigurations().Get(ctx, "default", options.GetOptions{}); !errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		t.Fatalf("absent FelixConfiguration: %v", err)
	}
	if _, err := c.ClusterInformation().Get(ctx, "default", options.GetOptions{}); err == nil {
		t.Fatal("ClusterInformation not served, read without an error")
	}
	if _, err := c.IPPools().Create(ctx, nil, options.SetOptions{}); !errors.Is(err, errNotHere) {
		t.Fatalf("a pool write: %v", err)
	}
}
