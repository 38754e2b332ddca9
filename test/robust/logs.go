package robust

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/capo-net/capo/daemon/controller"
)

// What capo says it did, read from its processes' logs (one JSON object a
// line) as they are written: every release, with its reason (a release
// the controller says may have been written among them), and every
// failpoint that fired, go into the history at the time logged.

// tail reads a file as it grows.
type tail struct {
	path    string
	off     int64
	partial []byte
}

// lines are the whole lines written since the last call.
func (t *tail) lines() [][]byte {
	f, err := os.Open(t.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil
	}
	b, err := io.ReadAll(f)
	if err != nil || len(b) == 0 {
		return nil
	}
	t.off += int64(len(b))
	b = append(t.partial, b...)
	cut := bytes.LastIndexByte(b, '\n')
	if cut < 0 {
		t.partial = b
		return nil
	}
	t.partial = append([]byte(nil), b[cut+1:]...)
	return bytes.Split(b[:cut], []byte("\n"))
}

// logLine is the part of a capo log line the suite reads.
type logLine struct {
	Time    time.Time `json:"time"`
	Msg     string    `json:"msg"`
	IP      string    `json:"ip"`
	Node    string    `json:"node"`
	Reason  string    `json:"reason"`
	Pod     string    `json:"pod"`
	Sandbox string    `json:"sandbox"` // the controller's: the released entry's
	// ReservedAs is the controller's: the released entry's own reason
	// (cni-del, cni-rewrite for a hold...).
	ReservedAs string    `json:"reservedAs"`
	Refs       []refLine `json:"refs"`
	Failpoint  string    `json:"failpoint"`
	Action     string    `json:"action"`
}

type refLine struct{ Node, IP, Sandbox string }

// logs follows every capo log of the cluster: the agents', the
// controllers', and capo-ipam's (in the runtime's plugin log).
type logs struct {
	mu    sync.Mutex // one reader at a time
	c     *cluster
	tails map[string]*tail
	who   map[string]string // path -> what wrote it
}

func newLogs(c *cluster) *logs {
	l := &logs{c: c, tails: map[string]*tail{}, who: map[string]string{}}
	for _, n := range c.nodes {
		l.follow(filepath.Join(n.env.Dir, "agent.log"), "capo-agent@"+n.env.Node)
		l.follow(filepath.Join(n.env.Dir, "plugins.log"), "capo-ipam@"+n.env.Node)
	}
	for _, r := range c.ctrls {
		l.follow(filepath.Join(r.env.Dir, "controller-"+r.id+".log"), "capo-controller "+r.id)
	}
	return l
}

func (l *logs) follow(path, who string) {
	l.tails[path] = &tail{path: path}
	l.who[path] = who
}

// read records what every log says it did since the last read.
func (l *logs) read() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for path, t := range l.tails {
		for _, line := range t.lines() {
			if !bytes.Contains(line, []byte(`"released"`)) && !bytes.Contains(line, []byte(`"failpoint fired"`)) && !bytes.Contains(line, []byte(controller.MaybeReleased)) {
				continue
			}
			var ll logLine
			if json.Unmarshal(line, &ll) != nil {
				continue
			}
			l.record(ll, l.who[path])
		}
	}
}

func (l *logs) record(ll logLine, who string) {
	h := l.c.hist
	switch ll.Msg {
	case "released", controller.MaybeReleased:
		// A release whose write lost its answer may have landed: it is
		// taken as one, so that the reservation's end is judged by its
		// reason (one that did not land is made again, and judged again).
		if ll.Msg == controller.MaybeReleased {
			who += ", may have been written"
		}
		if ll.IP != "" { // the controller's: one address
			h.Record(Event{Op: opReleased, IPs: []string{ll.IP}, Node: ll.Node, Pod: ll.Pod, Sandbox: ll.Sandbox, Reason: ll.Reason, Value: ll.ReservedAs, Detail: "by " + who}, ll.Time)
		}
		for _, r := range ll.Refs { // the agent's: a return's
			h.Record(Event{Op: opReleased, IPs: []string{r.IP}, Node: r.Node, Pod: ll.Pod, Sandbox: r.Sandbox, Reason: ll.Reason, Detail: "by " + who}, ll.Time)
		}
	case "failpoint fired":
		h.Record(Event{Op: opFailpoint, Detail: ll.Failpoint + "=" + ll.Action + " in " + who}, ll.Time)
	}
}
