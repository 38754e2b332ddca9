package testbed

import (
	"net/http"
	"time"
)

// reflectReadiness does what the kubelet's readiness probe does for the
// agent's pod: it polls /readyz and sets the pod's Ready condition on each
// change (a failure once it has lasted the agent's ReadinessLag), until
// the process ends. capo-controller covers a node while its
// agent's pod is not Ready, so a test sees the agent's readiness act.
func (a *Agent) reflectReadiness() {
	a.reflecting = make(chan struct{})
	go func() {
		defer close(a.reflecting)
		client := &http.Client{Timeout: time.Second}
		last := true // StartAgentWith reported it Ready
		var failingSince time.Time
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-a.proc.done:
				return
			case <-t.C:
			}
			now := readyz(client, "http://"+a.HealthAddr+"/readyz")
			switch {
			case now:
				failingSince = time.Time{}
			case failingSince.IsZero():
				failingSince = time.Now()
			}
			if now == last || !now && time.Since(failingSince) < a.readinessLag {
				continue
			}
			if err := a.env.setAgentPodReady(a.podNS, a.podName, now); err != nil {
				a.env.T.Logf("testbed: reflecting the agent's readiness: %v", err)
				continue
			}
			last = now
		}
	}()
}

func readyz(c *http.Client, url string) bool {
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
