package daemon

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// CachedJSON serves view's answer as JSON, computed at most once per ttl
// however many ask: a view that reads files or the datastore costs the
// node the same whether one client asks or a hundred.
func CachedJSON(ttl time.Duration, view func() any) http.Handler {
	c := &cached{ttl: ttl, view: view, now: time.Now}
	return c
}

type cached struct {
	ttl  time.Duration
	view func() any
	now  func() time.Time

	mu   sync.Mutex // held while computing: the others wait for its answer
	body []byte
	at   time.Time
}

func (c *cached) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	body, err := c.get()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (c *cached) get() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.body != nil && c.now().Sub(c.at) < c.ttl {
		return c.body, nil
	}
	b, err := json.Marshal(c.view())
	if err != nil {
		return nil, err
	}
	c.body, c.at = append(b, '\n'), c.now()
	return c.body, nil
}
