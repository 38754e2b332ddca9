package readiness

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

// errInconclusive: the probe lost a race; it proves nothing either way.
var errInconclusive = errors.New("probe inconclusive")

// Prober proves on its own that the agent can write, since a not-ready
// agent gets no traffic to prove it: it rewrites its bucket's head object
// unchanged, a compare-and-swap update that passes the same RBAC and
// admission as a reservation and changes nothing. Ready and recently
// proven by real writes, it does nothing.
type Prober struct {
	objs    calicostore.Objects
	bucket  int
	batcher Batcher // the write path: a stuck batcher cannot reserve either
	r       *Readiness
	gate    *gate.Gate    // checked first: Calico's API group and lock; nil checks nothing
	every   time.Duration // while ready
	retry   time.Duration // while not ready
	timeout time.Duration
}

// NewProber proves r through batcher, then by rewriting the head of bucket
// in objs, each write within timeout; g is checked first (nil: nothing).
func NewProber(objs calicostore.Objects, bucket int, batcher Batcher, r *Readiness, timeout time.Duration, g *gate.Gate) *Prober {
	return &Prober{objs: objs, bucket: bucket, batcher: batcher, r: r, every: probeEvery, retry: probeRetry, timeout: timeout, gate: g}
}

// Batcher is the agent's write path, as the prober pings it.
type Batcher interface {
	Reserve(ctx context.Context, entries []reserve.Entry) (*reserve.Result, error)
}

// Run probes until ctx ends.
func (p *Prober) Run(ctx context.Context) {
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
func (p *Prober) once(ctx context.Context) {
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
func (p *Prober) ping(ctx context.Context) error {
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
func (p *Prober) rewrite(ctx context.Context, create bool) error {
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
