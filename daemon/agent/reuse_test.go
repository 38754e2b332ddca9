package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	cnet "github.com/projectcalico/calico/libcalico-go/lib/net"

	"github.com/capo-net/capo/pkg/calico"
	"github.com/capo-net/capo/pkg/wire"
)

// reuseReader answers by address: a handle, cooling, or free.
type reuseReader map[string]string

func (r reuseReader) GetAssignmentAttributes(_ context.Context, ip cnet.IP) (map[string]string, *string, error) {
	switch h, ok := r[ip.String()]; {
	case !ok:
		return nil, nil, cerrors.ErrorResourceDoesNotExist{Identifier: ip.String()}
	case h == "cooling":
		return nil, nil, &calico.CoolingError{IP: ip.String(), ReleasedAt: time.Now()}
	default:
		return map[string]string{}, &h, nil
	}
}

// Of a teardown decided late, the addresses still its own, free, or
// cooling in Calico's IP cooldown (released, nobody's, free once cooled)
// are reserved; one another sandbox holds is not.
func TestNotReusedKeepsCoolingAddresses(t *testing.T) {
	r := reuseReader{"10.0.0.1": "k8s-pod-network.mine", "10.0.0.2": "k8s-pod-network.other", "10.0.0.3": "cooling"}
	got := notReused(context.Background(), r, "k8s-pod-network.mine", wire.PodRef{Namespace: "db", Name: "pg-0"},
		[]string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"})
	if want := []string{"10.0.0.1", "10.0.0.3", "10.0.0.4"}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
}
