package reserve

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingStore records how many writes reach it.
type countingStore struct {
	mu     sync.Mutex
	held   map[string]bool
	writes atomic.Int32
	gate   chan struct{}
}

func (s *countingStore) Reserve(_ context.Context, _ string, es []Entry) (*Result, error) {
	s.writes.Add(1)
	<-s.gate
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &Result{}
	for _, e := range es {
		addr, err := NormalizeAddr(e.IP) // as a real store answers
		if err != nil {
			return nil, err
		}
		if s.held[addr] {
			r.AlreadyHeld = append(r.AlreadyHeld, addr)
		} else {
			s.held[addr] = true
			r.Added = append(r.Added, addr)
		}
	}
	return r, nil
}
func (s *countingStore) Release(context.Context, []Ref) ([]Ref, error)     { return nil, nil }
func (s *countingStore) Reown(context.Context, []Ref, string) error        { return nil }
func (s *countingStore) List(context.Context) (*Listing, error)            { return &Listing{}, nil }
func (s *countingStore) ListNode(context.Context, string) ([]Entry, error) { return nil, nil }
func (s *countingStore) Stamp(context.Context, []Ref, time.Time) error     { return nil }
func (s *countingStore) Tidy(context.Context) (*Tidied, error)             { return &Tidied{}, nil }

func (s *countingStore) ReleaseByHand(context.Context, []Ref, time.Time) ([]Ref, error) {
	return nil, nil
}

func TestBatcherCoalescesConcurrentReservations(t *testing.T) {
	st := &countingStore{held: map[string]bool{"10.0.0.0": true}, gate: make(chan struct{})}
	b := NewBatcher(st, "n1", func() time.Duration { return time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	var wg sync.WaitGroup
	results := make([]*Result, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.Reserve(ctx, []Entry{{IP: fmt.Sprintf("10.0.0.%d", i)}})
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		}()
	}
	// Let every request queue up behind the first write, then release it.
	time.Sleep(100 * time.Millisecond)
	close(st.gate)
	wg.Wait()
	if w := st.writes.Load(); w > 3 {
		t.Fatalf("%d writes for 100 concurrent reservations; want them batched", w)
	}
	for i, r := range results {
		if r == nil {
			t.Fatalf("request %d got no result", i)
		}
		if i == 0 && len(r.AlreadyHeld) != 1 || i > 0 && len(r.Added) != 1 {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
}

func TestBatcherHonoursCallerDeadline(t *testing.T) {
	st := &countingStore{held: map[string]bool{}, gate: make(chan struct{})}
	defer close(st.gate)
	b := NewBatcher(st, "n1", func() time.Duration { return time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	short, c2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer c2()
	if _, err := b.Reserve(short, []Entry{{IP: "10.0.0.1"}}); err == nil {
		t.Fatal("want the caller's deadline to end the wait")
	}
}

// A request with an address that does not parse fails alone; the others
// in its batch are written, and each caller gets its own spelling back.
func TestBatcherBadRequestFailsAlone(t *testing.T) {
	st := &countingStore{held: map[string]bool{}, gate: make(chan struct{})}
	close(st.gate)
	b := NewBatcher(st, "n1", func() time.Duration { return time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	var wg sync.WaitGroup
	var good *Result
	var goodErr, badErr error
	wg.Add(2)
	go func() { defer wg.Done(); good, goodErr = b.Reserve(ctx, []Entry{{IP: "FD00:0::1"}}) }()
	go func() { defer wg.Done(); _, badErr = b.Reserve(ctx, []Entry{{IP: "10.0.0.1/33"}}) }()
	wg.Wait()
	if goodErr != nil || len(good.Added) != 1 || good.Added[0] != "FD00:0::1" {
		t.Fatalf("good request: %+v %v", good, goodErr)
	}
	if badErr == nil {
		t.Fatal("a bad address must fail its request")
	}
}
