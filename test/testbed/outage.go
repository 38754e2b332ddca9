package testbed

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// StopAPIServer stops the kube-apiserver, as an outage of the control plane
// does; StartAPIServer brings it back on the same address with the same
// flags. Only a test that owns the whole bed may do this.
func (b *Bed) StopAPIServer() {
	if p := b.named("kube-apiserver"); p != nil {
		p.stop()
	}
}

// StartAPIServer restarts the kube-apiserver StopAPIServer stopped and waits
// until it is ready.
func (b *Bed) StartAPIServer() error {
	return b.restart("kube-apiserver", func(ctx context.Context) bool {
		body, err := b.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	})
}

// StopEtcd stops etcd, as an outage of the datastore does: the API server
// and Calico's etcdv3 clients lose it; StartEtcd brings it back on the same
// address with the same data. Only a test that owns the whole bed may do this.
func (b *Bed) StopEtcd() {
	if p := b.named("etcd"); p != nil {
		p.stop()
	}
}

// StartEtcd restarts the etcd StopEtcd stopped and waits until it is healthy.
func (b *Bed) StartEtcd() error {
	return b.restart("etcd", func(ctx context.Context) bool {
		p := b.named("etcd")
		return waitHTTP(p, b.EtcdURL+"/health", nil, "", time.Second) == nil
	})
}

// restart starts the stopped server of that name again with its flags and
// waits until ready says so.
func (b *Bed) restart(name string, ready func(context.Context) bool) error {
	old := b.named(name)
	if old == nil {
		return fmt.Errorf("no %s in the bed", name)
	}
	if !old.exited() {
		return nil
	}
	log := filepath.Join(b.Dir, name+".log")
	p, err := b.sp.start(name, log, old.cmd.Args...)
	if err != nil {
		return err
	}
	b.mu.Lock()
	for i, q := range b.procs {
		if q == old {
			b.procs[i] = p
		}
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if p.exited() {
			return fmt.Errorf("%s exited on restart; see %s", name, log)
		}
		if ready(ctx) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready 2 minutes after its restart", name)
}

func (b *Bed) named(name string) *proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}
