package testbed

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// spawner starts children from one OS thread that never exits: Pdeathsig is
// tied to the thread that forked, and tests that enter network namespaces
// lock and may retire threads.
type spawner struct{ req chan func() }

func newSpawner() *spawner {
	s := &spawner{req: make(chan func())}
	go func() {
		runtime.LockOSThread()
		for f := range s.req {
			f()
		}
	}()
	return s
}

// proc is a server the bed runs; it dies with the test process.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *spawner) start(name, logPath string, argv ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	errc := make(chan error, 1)
	s.req <- func() { errc <- cmd.Start() }
	if err := <-errc; err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) stop() {
	if p == nil || p.exited() { // its process group id may be another's by now
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("listener address %v is not TCP", l.Addr())
	}
	return a.Port, nil
}
