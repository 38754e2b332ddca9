package wire

import (
	"errors"
	"net"
	"syscall"
)

// peerUID is the uid of the process at the other end of a unix socket, as
// the kernel recorded it when that process called listen (SO_PEERCRED).
func peerUID(conn net.Conn) (uid int, known bool, err error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, false, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, false, err
	}
	if credErr != nil {
		return 0, false, credErr
	}
	return int(cred.Uid), true, nil
}
