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
	if p := b.apiServer(); p != nil {
		p.stop()
	}
}

// StartAPIServer restarts the kube-apiserver StopAPIServer stopped and waits
// until it is ready.
func (b *Bed) StartAPIServer() error {
	old := b.apiServer()
	if old == nil {
		return fmt.Errorf("no kube-apiserver in the bed")
	}
	if !old.exited() {
		return nil
	}
	p, err := b.sp.start("kube-apiserver", filepath.Join(b.Dir, "kube-apiserver.log"), old.cmd.Args...)
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
			return fmt.Errorf("kube-apiserver exited on restart; see %s", filepath.Join(b.Dir, "kube-apiserver.log"))
		}
		if body, err := b.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil && string(body) == "ok" {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready 2 minutes after its restart")
}

func (b *Bed) apiServer() *proc {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.procs {
		if p.name == "kube-apiserver" {
			return p
		}
	}
	return nil
}
