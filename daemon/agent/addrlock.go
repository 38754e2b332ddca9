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
