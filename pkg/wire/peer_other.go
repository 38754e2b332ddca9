//go:build !linux

package wire

import "net"

// peerUID is not read off Linux, where capo-ipam and the agent never run.
func peerUID(net.Conn) (uid int, known bool, err error) { return 0, false, nil }
