package apigroup

import (
	"context"
	"log/slog"
	"os"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// The mode this process decided: decided once, then everyone reads it, so
// no two parts of a process can speak to Calico in different groups.
var (
	inForceMu sync.Mutex
	inForce   *Mode
)

// DecideOnce decides the group from the environment, netconf (the node's
// calico_api_group, "" off the node) and the API server's discovery, logs
// it, and keeps it for the process. Later calls return the first answer.
func DecideOnce(ctx context.Context, etcd bool, netconf string, disc discovery.DiscoveryInterface) (Mode, error) {
	inForceMu.Lock()
	defer inForceMu.Unlock()
	if inForce != nil {
		return *inForce, nil
	}
	m, err := decide(ctx, inputs{Etcd: etcd, Env: os.Getenv(EnvGroup), Netconf: netconf, Groups: serverGroups(disc)})
	if err != nil {
		return Mode{}, err
	}
	inForce = &m
	slog.Info("calico API group in force", "group", m.Group, "source", m.Source)
	return m, nil
}

// InForce is the mode DecideOnce decided, and whether it has.
func InForce() (Mode, bool) {
	inForceMu.Lock()
	defer inForceMu.Unlock()
	if inForce == nil {
		return Mode{}, false
	}
	return *inForce, true
}

func serverGroups(disc discovery.DiscoveryInterface) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		gl, err := disc.ServerGroups()
		if apierrors.IsNotFound(err) {
			return nil, nil // an endpoint that serves no API groups at all: no Calico either
		}
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(gl.Groups))
		for _, g := range gl.Groups {
			names = append(names, g.Name)
		}
		return names, nil
	}
}
