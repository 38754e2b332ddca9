package robust

import (
	"fmt"
	"math/rand/v2"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/capo-net/capo/pkg/config"
	"github.com/capo-net/capo/test/testbed"
)

// The traffic model: what the cluster holds, as the suite drove it, and
// the seeded choice of what it does next. StatefulSet members are
// selected (Capo's default selector matches them); plain pods are not.
type traffic struct {
	mu   sync.Mutex
	sets []*setState
	pods []*podState
	mode config.ReturnMode
}

type setState struct {
	name     string
	exists   bool
	uid      types.UID // the current incarnation's
	replicas int
	ttl      string // its capo.io/ip-reserve-time; "" none
	busy     bool
}

type podState struct {
	name    string
	set     *setState // nil: a plain pod
	ordinal int
	// The pod object, if any; the set incarnation it belongs to, its node
	// (an index into the cluster's nodes) and whether the kubelet evicted
	// it (phase Failed, its sandbox torn down).
	obj     *corev1.Pod
	setUID  types.UID
	node    int
	evicted bool
	sb      *testbed.Sandbox // its live sandbox, if any
	busy    bool
}

func (p *podState) hasObject() bool { return p.obj != nil }

// wanted: a member whose set wants it (a plain pod is always wanted).
func (p *podState) wanted() bool {
	return p.set == nil || p.set.exists && p.ordinal < p.set.replicas
}

func newTraffic(cfg Config) *traffic {
	m := &traffic{mode: config.ReturnSameNode}
	for _, name := range cfg.Sets {
		s := &setState{name: name}
		m.sets = append(m.sets, s)
		for i := range cfg.MaxReplicas {
			m.pods = append(m.pods, &podState{name: fmt.Sprintf("%s-%d", name, i), set: s, ordinal: i, node: -1})
		}
	}
	for i := range cfg.PlainPods {
		m.pods = append(m.pods, &podState{name: fmt.Sprintf("web-%d", i), node: -1})
	}
	return m
}

// op is one thing the cluster does, with every random choice made when
// it was picked, so that a seed picks the same sequence.
type op struct {
	kind  string
	pod   *podState
	set   *setState
	node  int               // where a pod starts
	first bool              // delete-pod: the object goes before the DEL (else after)
	n     int               // scale: the new replicas
	ttl   string            // set-ttl
	pick  int               // capoctl-release, ask-release: which held address
	mode  config.ReturnMode // return-mode
}

// The operations the traffic picks from, and their weights.
const (
	kStart    = "start"            // a wanted pod without a sandbox: its object (if none) and an ADD
	kReplace  = "replace"          // an evicted member: its object deleted and made anew, then ADD
	kPodGC    = "pod-gc"           // an evicted plain pod's object deleted
	kEvict    = "evict"            // the kubelet's eviction, then its DEL
	kDelete   = "delete-pod"       // an API delete, and the DEL
	kRecreate = "recreate-sandbox" // the pod's sandbox torn down and set up again
	kScale    = "scale"
	kDelSet   = "delete-set" // and its members
	kNewSet   = "create-set"
	kTTL      = "set-ttl"
	kCapoctl  = "capoctl-release"
	kAsk      = "ask-release"
	kMode     = "return-mode"
)

var weights = map[string]float64{
	kStart: 10, kReplace: 6, kPodGC: 3, kEvict: 3, kDelete: 3, kRecreate: 2, kScale: 1.2,
	kDelSet: 0.3, kNewSet: 3, kTTL: 0.5, kCapoctl: 0.6, kAsk: 0.4, kMode: 0.2,
}

// next picks the next operation among those that apply now, marking what
// it touches busy; nil when every pod is busy.
func (m *traffic) next(r *rand.Rand, cfg Config) *op {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cands []*op
	for _, p := range m.pods {
		if !p.busy && (p.set == nil || !p.set.busy) {
			cands = append(cands, m.podOps(p)...)
		}
	}
	for _, s := range m.sets {
		if !s.busy && !m.anyBusy(s) {
			cands = append(cands, m.setOps(s)...)
		}
	}
	cands = append(cands, &op{kind: kCapoctl}, &op{kind: kAsk}, &op{kind: kMode})
	o := choose(r, cands)
	if o == nil {
		return nil
	}
	m.fill(r, o, cfg)
	m.mark(o, true)
	return o
}

func (m *traffic) podOps(p *podState) []*op {
	switch {
	case p.sb != nil:
		return []*op{{kind: kEvict, pod: p}, {kind: kDelete, pod: p}, {kind: kRecreate, pod: p}}
	case p.evicted && p.set != nil && p.wanted():
		return []*op{{kind: kReplace, pod: p}}
	case p.evicted:
		return []*op{{kind: kPodGC, pod: p}}
	case p.wanted():
		return []*op{{kind: kStart, pod: p}}
	}
	return nil
}

func (m *traffic) setOps(s *setState) []*op {
	if !s.exists {
		return []*op{{kind: kNewSet, set: s}}
	}
	return []*op{{kind: kScale, set: s}, {kind: kDelSet, set: s}, {kind: kTTL, set: s}}
}

func (m *traffic) anyBusy(s *setState) bool {
	for _, p := range m.pods {
		if p.set == s && p.busy {
			return true
		}
	}
	return false
}

func choose(r *rand.Rand, cands []*op) *op {
	total := 0.0
	for _, o := range cands {
		total += weights[o.kind]
	}
	x := r.Float64() * total
	for _, o := range cands {
		if x -= weights[o.kind]; x < 0 {
			return o
		}
	}
	return nil
}

// fill makes the operation's random choices.
func (m *traffic) fill(r *rand.Rand, o *op, cfg Config) {
	o.node = r.IntN(cfg.Nodes)
	if o.pod != nil && o.pod.node >= 0 && r.Float64() < 0.7 {
		o.node = o.pod.node // a member mostly comes back where it was
	}
	o.first = r.IntN(2) == 0
	o.n = r.IntN(cfg.MaxReplicas + 1)
	if o.kind == kNewSet {
		o.n = 1 + r.IntN(cfg.MaxReplicas)
	}
	o.ttl = []string{"", "3s", "8s", "20s", "1h"}[r.IntN(5)]
	o.pick = r.IntN(1 << 20)
	o.mode = config.ReturnSameNode
	if r.IntN(2) == 0 {
		o.mode = config.ReturnAnyNode
	}
}

// mark sets what o touches busy (or idle again).
func (m *traffic) mark(o *op, busy bool) {
	if o.pod != nil {
		o.pod.busy = busy
	}
	if o.set != nil {
		o.set.busy = busy
		for _, p := range m.pods {
			if p.set == o.set {
				p.busy = busy
			}
		}
	}
}

// done marks o's pods and set idle.
func (m *traffic) done(o *op) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mark(o, false)
}
