// Command record writes what a release's capo-ipam and capo-agent put on
// the wire and on the host, as golden files for the next release's
// compatibility tests (pkg/wire/compat_test.go, pkg/journal/compat_test.go).
// It lives in testdata so that it builds only on purpose, against the
// release being recorded:
//
//	git worktree add /tmp/prev <commit>
//	cp -r pkg/wire/testdata/record /tmp/prev/pkg/wire/testdata/
//	cd /tmp/prev && go run ./pkg/wire/testdata/record <this checkout>/pkg/wire/testdata/<release>
//
// It uses only pkg/wire and pkg/journal, whose exported names it reads have
// been there since the first release.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/capo-net/capo/pkg/journal"
	"github.com/capo-net/capo/pkg/wire"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: record DIR")
		os.Exit(2)
	}
	if err := record(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

var (
	pod      = wire.PodRef{Namespace: "kafka", Name: "kafka-0", UID: "6f1c0e0a-6a53-4a4e-9a51-0c4b7e0d2b11"}
	owner    = &wire.Owner{Kind: "StatefulSet", Name: "kafka", UID: "0b7f3c2e-1d7e-4d6f-8a1e-2f4c5d6e7f80"}
	decision = &wire.Decision{Selected: true, Rule: "podSelectors[0]", Owner: owner}
	created  = time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	reserve  = &wire.ReserveRequest{
		ContainerID: "3f9a1c", IfName: "eth0", Network: "k8s-pod-network", Pod: pod,
		RecordedIPs: []string{"10.65.0.7", "fd00:65::7"}, AtAdd: decision,
	}
)

func record(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := requests(dir); err != nil {
		return err
	}
	if err := responses(dir); err != nil {
		return err
	}
	return host(dir)
}

// requests writes each request exactly as the client sends it.
func requests(dir string) error {
	calls := map[string]func(c *wire.Client) error{
		"request-reserve.http": func(c *wire.Client) error {
			_, err := c.Reserve(context.Background(), reserve)
			return err
		},
		"request-ipam-annotations.http": func(c *wire.Client) error {
			_, err := c.IPAMAnnotations(context.Background(), pod)
			return err
		},
		"request-return-outcome.http": func(c *wire.Client) error {
			return c.ReportReturn(context.Background(), &wire.ReturnOutcome{
				Pod: pod, Sandbox: wire.Sandbox{Network: "k8s-pod-network", ContainerID: "8d2e4b", IfName: "eth0"},
				IPs: []string{"10.65.0.7"}, Outcome: wire.Returned,
			})
		},
	}
	for name, call := range calls {
		raw, err := capture(dir, call)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// capture runs call against a socket that records the request's bytes and
// answers a reserve's "reserved".
func capture(dir string, call func(c *wire.Client) error) ([]byte, error) {
	sock := filepath.Join(dir, "record.sock")
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	defer os.Remove(sock)
	defer l.Close()
	got := make(chan []byte, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		req, err := http.ReadRequest(r)
		if err != nil {
			got <- nil
			return
		}
		body, _ := io.ReadAll(req.Body)
		// The request line, the headers as sent, then the body.
		raw := fmt.Sprintf("%s %s %s\r\nHost: %s\r\n", req.Method, req.RequestURI, req.Proto, req.Host)
		for _, k := range []string{"Content-Type", "Content-Length", "Capo-Wire-Version"} {
			if v := req.Header.Get(k); v != "" {
				raw += k + ": " + v + "\r\n"
			}
		}
		got <- append([]byte(raw+"\r\n"), body...)
		_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 22\r\n\r\n{\"outcome\":\"reserved\"}"))
	}()
	err = call(wire.NewClient(sock))
	return <-got, err
}

// responses writes each answer body as the agent encodes it
// (json.Encoder, so with a trailing newline).
func responses(dir string) error {
	bodies := map[string]any{
		"response-reserve-reserved.json":          &wire.ReserveResponse{Outcome: wire.Reserved, IPs: []string{"10.65.0.7", "fd00:65::7"}, Rule: "podSelectors[0]"},
		"response-reserve-not-selected.json":      &wire.ReserveResponse{Outcome: wire.NotSelected},
		"response-reserve-node-not-opted-in.json": &wire.ReserveResponse{Outcome: wire.NodeNotOptedIn},
		"response-reserve-nothing.json":           &wire.ReserveResponse{Outcome: wire.NothingToReserve},
		"response-error.json":                     &wire.ErrorResponse{Error: "datastore unreachable"},
		"response-ipam-annotations.json": &wire.AnnotationsResponse{
			Namespace: map[string]string{"cni.projectcalico.org/ipv4pools": `["pool-a"]`},
			Pod:       map[string]string{"cni.projectcalico.org/ipv6pools": `["pool-b"]`},
			Decision:  decision,
			Return:    &wire.Return{IPs: []string{"10.65.0.7"}},
		},
		"response-ipam-annotations-held.json": &wire.AnnotationsResponse{
			Decision: decision,
			Return:   &wire.Return{Held: []string{"10.65.0.7"}, Reason: "in-use", Why: "10.65.0.7 is allocated to another pod"},
		},
		"response-return-outcome.json": struct{}{},
	}
	for name, v := range bodies {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		err = json.NewEncoder(f).Encode(v)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// host writes a journal record and an ADD record as capo-ipam does.
func host(dir string) error {
	tmp, err := os.MkdirTemp("", "record")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	j := journal.Dir{Root: tmp}
	netconf := []byte(`{"cniVersion":"0.3.1","name":"k8s-pod-network","type":"calico","ipam":{"type":"capo-ipam","delegate":"calico-ipam"}}`)
	env := map[string]string{"CNI_CONTAINERID": "3f9a1c", "CNI_NETNS": "/var/run/netns/cni-1", "CNI_IFNAME": "eth0",
		"CNI_ARGS": "K8S_POD_NAMESPACE=kafka;K8S_POD_NAME=kafka-0", "CNI_PATH": "/opt/cni/bin"}
	name, err := j.Write(&journal.Record{Created: created, Request: *reserve, Netconf: netconf, Env: env, Why: "dial unix /var/run/capo/agent.sock: connect: no such file or directory"})
	if err != nil {
		return err
	}
	if err := copyFile(filepath.Join(tmp, "pending", name), filepath.Join(dir, "journal-record.json")); err != nil {
		return err
	}
	rec := &journal.AddrRecord{Network: "k8s-pod-network", ContainerID: "3f9a1c", IfName: "eth0", Pod: pod, IPs: reserve.RecordedIPs, Created: created, AtAdd: decision}
	if err := j.RecordAddrs(rec); err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(tmp, "addrs"))
	if err != nil || len(entries) != 1 {
		return fmt.Errorf("ADD record not written: %v", err)
	}
	return copyFile(filepath.Join(tmp, "addrs", entries[0].Name()), filepath.Join(dir, "add-record.json"))
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
