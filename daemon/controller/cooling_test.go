package controller

import "testing"

// An away agent's teardown whose address Calico released into its IP
// cooldown (Calico 3.33+: the allocation kept, pointing at no handle) is
// reserved: the address is nobody's, and free to the next pod once cooled.
// Read as an allocation of handle "", it was taken for another pod's, and
// nothing was reserved.
func TestAgentAwayReservesAnAddressCoolingInCalico(t *testing.T) {
	b := newAwayBed(t)
	b.agentReady(false)
	b.ipam.mu.Lock()
	delete(b.ipam.by, "10.0.0.5")
	b.ipam.cooling = map[string]bool{"10.0.0.5": true}
	b.ipam.mu.Unlock()
	b.evict()
	e, ok := b.held("10.0.0.5")
	if !ok || e.Reason != ReasonAgentAway || e.Pod != "broker-0" {
		t.Fatalf("reservation %+v (held %v)", e, ok)
	}
}
