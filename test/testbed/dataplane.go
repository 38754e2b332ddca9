package testbed

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// VerifyDataplane proves the sandbox has a working interface: eth0 is up
// inside the netns with the assigned address, and a TCP connection from the
// host reaches a listener in the pod through Calico's veth and host route.
func (s *Sandbox) VerifyDataplane() error {
	if len(s.IPs) == 0 {
		return fmt.Errorf("sandbox has no IP")
	}
	ip := s.IPs[0]
	var l net.Listener
	err := ns.WithNetNSPath(s.NetNS, func(ns.NetNS) error {
		link, err := netlink.LinkByName("eth0")
		if err != nil {
			return fmt.Errorf("eth0 in pod netns: %w", err)
		}
		if link.Attrs().Flags&net.FlagUp == 0 {
			return fmt.Errorf("eth0 is down")
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		found := false
		for _, a := range addrs {
			found = found || a.IP.Equal(ip)
		}
		if !found {
			return fmt.Errorf("eth0 lacks %s (has %v)", ip, addrs)
		}
		// The socket belongs to the pod's netns for its whole life.
		l, err = net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		return err
	})
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = c.Write([]byte("capo"))
			c.Close()
		}
	}()
	c, err := net.DialTimeout("tcp", l.Addr().String(), 3*time.Second)
	if err != nil {
		return fmt.Errorf("host cannot reach the pod at %s: %w", l.Addr(), err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "capo" {
		return fmt.Errorf("reading from the pod: %q, %v", b, err)
	}
	return nil
}
