package agent

import (
	"slices"
	"sync"
)

// addrLocks orders the writes that touch one address (a teardown's
// reservation, the end of a return's) and nothing else: teardowns of other
// addresses go on, and the batcher can group them into one write.
type addrLocks struct {
	mu    sync.Mutex
	locks map[string]*addrLock
}

type addrLock struct {
	sync.Mutex
	users int // holders and waiters: the lock is dropped when none is left
}

// lock takes the locks of ips, in one order so two callers never wait on
// each other, and returns what gives them back.
func (l *addrLocks) lock(ips []string) (unlock func()) {
	keys := slices.Clone(ips)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	taken := make([]*addrLock, 0, len(keys))
	for _, ip := range keys {
		al := l.get(ip)
		al.Lock()
		taken = append(taken, al)
	}
	return func() {
		for i, al := range taken {
			al.Unlock()
			l.put(keys[i], al)
		}
	}
}

func (l *addrLocks) get(ip string) *addrLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[string]*addrLock{}
	}
	al := l.locks[ip]
	if al == nil {
		al = &addrLock{}
		l.locks[ip] = al
	}
	al.users++
	return al
}

func (l *addrLocks) put(ip string, al *addrLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if al.users--; al.users == 0 {
		delete(l.locks, ip)
	}
}

// addrGuard orders the end of a returned address's reservation with new
// reservations of the same address, address by address: the decider holds
// it around every reservation write (reserving), the settler around the
// end of a return's. pending are the addresses whose reservations are to
// end once their sandbox is up; a reservation written since removes them.
type addrGuard struct {
	locks   addrLocks
	mu      sync.Mutex
	pending map[string]bool
}

// reserving is taken by every reservation write, for its addresses only:
// they are no longer to be ended as returned.
func (g *addrGuard) reserving(ips []string) (unlock func()) {
	unlock = g.locks.lock(ips)
	g.settle(ips)
	return unlock
}

// lock takes the addresses' locks alone (the end of a return's
// reservations).
func (g *addrGuard) lock(ips []string) (unlock func()) { return g.locks.lock(ips) }

// expect notes addresses whose reservations are to end once their sandbox
// is up; any teardown before then reserves them anew, and that must stay.
func (g *addrGuard) expect(ips []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[string]bool{}
	}
	for _, ip := range ips {
		g.pending[ip] = true
	}
}

// isPending reports whether ip's reservation is still to end as returned.
func (g *addrGuard) isPending(ip string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending[ip]
}

// settle forgets the addresses as pending: ended, or reserved anew.
func (g *addrGuard) settle(ips []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ip := range ips {
		delete(g.pending, ip)
	}
}
