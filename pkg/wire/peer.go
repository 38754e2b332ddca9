package wire

import (
	"fmt"
	"net"
	"os"
)

// trustedPeer checks who serves the socket before a word of its answer is
// believed: capo-agent runs as root, and so does capo-ipam. A process of
// another uid that got the socket's path (a directory left writable, a
// host path mounted into a pod) would otherwise decide which addresses the
// delegate releases and which sandboxes capo-ipam frees. The client's own
// uid is accepted too, so a test run by a user talks to its own agent.
func trustedPeer(conn net.Conn, socket string) error {
	uid, known, err := peerUID(conn)
	if err != nil {
		return fmt.Errorf("reading who serves %s: %w", socket, err)
	}
	if !known || uid == 0 || uid == os.Geteuid() {
		return nil
	}
	return fmt.Errorf("%s is served by a process of uid %d, not root: it is not capo-agent, and nothing it answers is trusted (find what listens there with ss -xlp)", socket, uid)
}
