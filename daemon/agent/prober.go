package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/options"

	"github.com/capo-net/capo/pkg/calico/gate"
	"github.com/capo-net/capo/pkg/pause"
	"github.com/capo-net/capo/pkg/reserve"
	"github.com/capo-net/capo/pkg/reserve/calicostore"
)

// How often the prober checks that the agent can write: while ready and
// no real write proved it lately, and while not ready.
const (
	probeEvery = 20 * time.Second
	probeRetry = 2 * time.Second
)

// watchedStore tells readiness how every reservation write went. Only a
// write that changed something proves the agent can write: a reservation
// found already held (the controller covered it) wrote nothing.
type watchedStore struct {
	reserve.Store
	r *readiness
}

var _ reserve.Store = watchedStore{}

func (s watchedStore) Reserve(ctx context.Context, node string, entries []reserve.Entry) (*reserve.Result, error) {
	res, err := s.Store.Reserve(ctx, node, entries)
	switch {
	case err != nil:
		s.r.failed(err)
	case len(res.Added) > 0:
		s.r.landed()
	}
	return res, err
}

func (s watchedStore) Release(ctx context.Context, refs []reserve.Ref) ([]reserve.Ref, error) {
	out, err := s.Store.Release(ctx, refs)
	switch {
	case err != nil:
		s.r.failed(err)
	case len(out) > 0:
		s.r.landed()
	}
	return out, err
}

// errInconclusive: the probe lost a race; it proves nothing either way.
var errInconclusive = errors.New("probe inconclusive")

// prober proves on its own that the agent can write, since a not-ready
// agent gets no traffic to prove it: it rewrites its bucket's head object
// unchanged, a compare-and-swap update that passes the same RBAC and
// admission as a reservation and changes nothing. Ready and recently
// proven by real writes, it does nothing.
type prober struct {
	objs    calicostore.Objects
	bucket  int
	batcher interface { // the write path: a stuck batcher cannot reserve either
		Reserve(ctx context.Context, entries []reserve.Entry) (*reserve.Result, error)
	}
	r       *readiness
	gate    *gate.Gate    // checked first: Calico's API group and lock; nil checks nothing
	every   time.Duration // while ready
	retry   time.Duration // while not ready
	timeout time.Duration
}

func (p *prober) run(ctx context.Context) {
	for {
		p.once(ctx)
		wait := p.every
		if ok, _, _ := p.r.state(); !ok {
			wait = p.retry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-p.r.wake: // a write just failed: try again after the short wait
			if !pause.Sleep(ctx, p.retry) {
				return
			}
		}
	}
}

// once probes unless a real write proved the agent's writes recently.
func (p *prober) once(ctx context.Context) {
	if p.gate != nil {
		actx, cancel := context.WithTimeout(ctx, p.timeout)
		err := p.gate.Once(actx)
		cancel()
		p.r.export()
		if err != nil {
			if !isAPIProblem(err) {
				p.r.failed(err)
			}
			return
		}
	}
	if p.r.provenWithin(p.every) {
		return
	}
	if p.batcher != nil {
		if err := p.ping(ctx); err != nil {
			p.r.failed(fmt.Errorf("the reservation batcher did not answer: %w", err))
			return
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_, reason, _ := p.r.state()
	switch err := p.rewrite(ctx, reason != "" && reason != reasonStarting); {
	case err == nil:
		p.r.landed()
	case errors.Is(err, errInconclusive):
	default:
		p.r.failed(err)
	}
}

// ping is a round trip through the batcher. It waits twice the write
// timeout: a batcher whose write timed out still answers in time, so
// only one that does not answer at all counts as stuck for /livez.
func (p *prober) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 2*p.timeout)
	defer cancel()
	p.r.pingSent()
	_, err := p.batcher.Reserve(pctx, nil)
	if pctx.Err() == nil || err == nil {
		p.r.pingAnswered()
	}
	return err
}

// rewrite updates the bucket's head as it is. When there is none, a
// failed agent creates it empty, as its next reservation would; otherwise
// the read is enough, sparing an object per start (the next reservation's
// failure would turn the agent not ready).
func (p *prober) rewrite(ctx context.Context, create bool) error {
	name := calicostore.BucketName(p.bucket, 0)
	cur, err := p.objs.Get(ctx, name, options.GetOptions{})
	if errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		if !create {
			return nil
		}
		_, err = p.objs.Create(ctx, calicostore.EmptyHead(p.bucket), options.SetOptions{})
		if errors.As(err, new(cerrors.ErrorResourceAlreadyExists)) {
			return errInconclusive
		}
		return wrapProbe("creating", name, err)
	}
	if err != nil {
		return wrapProbe("reading", name, err)
	}
	_, err = p.objs.Update(ctx, cur, options.SetOptions{})
	if errors.As(err, new(cerrors.ErrorResourceUpdateConflict)) || errors.As(err, new(cerrors.ErrorResourceDoesNotExist)) {
		return errInconclusive // someone wrote or retired it in between
	}
	return wrapProbe("rewriting", name, err)
}

func wrapProbe(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("probe: %s reservation object %s (check the agent's RBAC and any admission policy or webhook on ipreservations): %w", op, name, err)
}
