package wire

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A socket served by a process that is not root is not the agent: capo-ipam
// believes nothing it answers (a DEL journals, an ADD asks the API server),
// whatever it says. The same server as root is believed.
func TestImpostorNotTrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("serving as another uid needs root")
	}
	for _, tc := range []struct {
		uid     int
		wantErr string
	}{{uid: 65534, wantErr: "served by a process of uid 65534, not root"}, {uid: 0}} {
		sock := listenAs(t, tc.uid)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := NewClient(sock).Reserve(ctx, &ReserveRequest{ContainerID: "c", Network: "n"})
		cancel()
		if tc.wantErr == "" && (err != nil || resp.Outcome != NotSelected) {
			t.Fatalf("uid %d: %+v %v", tc.uid, resp, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Fatalf("uid %d: %+v %v, want %q", tc.uid, resp, err, tc.wantErr)
		}
	}
}

// listenAs opens an abstract unix socket (no file, so no directory the uid
// must write) as uid, the kernel's SO_PEERCRED of its clients, and answers
// every request "not-selected".
func listenAs(t *testing.T, uid int) string {
	t.Helper()
	sock := fmt.Sprintf("@capo-wire-test-%d-%d", os.Getpid(), uid)
	if err := syscall.Setresuid(-1, uid, -1); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err := syscall.Setresuid(-1, 0, -1); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"outcome":"not-selected"}`))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}
