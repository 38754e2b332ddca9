package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// previous is the last release's recording (testdata/record).
const previous = "testdata/0.1.0"

// This capo-ipam against the previous release's agent: each answer that
// agent gives, as it encodes it and with no version header, is taken as
// before, and the agent is known to speak v1.
func TestPreviousAgentsAnswersAccepted(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"response-reserve-reserved.json", "response-reserve-not-selected.json", "response-reserve-node-not-opted-in.json", "response-reserve-nothing.json"} {
		c := NewClient(serve(t, 200, golden(t, name), 0))
		resp, err := c.Reserve(ctx, &ReserveRequest{ContainerID: "c", Network: "n"})
		if err != nil || resp.Outcome == "" || c.AgentVersion != 1 {
			t.Fatalf("%s: %+v %v, agent v%d", name, resp, err, c.AgentVersion)
		}
	}
	for _, name := range []string{"response-ipam-annotations.json", "response-ipam-annotations-held.json"} {
		c := NewClient(serve(t, 200, golden(t, name), 0))
		resp, err := c.IPAMAnnotations(ctx, PodRef{Namespace: "kafka", Name: "kafka-0"})
		if err != nil || resp.Decision == nil || resp.Return == nil {
			t.Fatalf("%s: %+v %v", name, resp, err)
		}
	}
	if err := NewClient(serve(t, 200, golden(t, "response-return-outcome.json"), 0)).ReportReturn(ctx, &ReturnOutcome{}); err != nil {
		t.Fatal(err)
	}
	_, err := NewClient(serve(t, 500, golden(t, "response-error.json"), 0)).Reserve(ctx, &ReserveRequest{})
	if err == nil || err.Error() != "capo-agent: datastore unreachable" {
		t.Fatalf("the previous agent's error reads %v", err)
	}
}

// The previous release's agent reads what this capo-ipam sends as what
// its own capo-ipam sent: the same method, path and body, byte for byte,
// and the same headers plus the version, which it ignores.
func TestRequestsReadByPreviousAgent(t *testing.T) {
	calls := map[string]func(c *Client) error{
		"request-reserve.http": func(c *Client) error {
			var req ReserveRequest
			if err := json.Unmarshal(goldenBody(t, "request-reserve.http"), &req); err != nil {
				return err
			}
			_, err := c.Reserve(context.Background(), &req)
			return err
		},
		"request-ipam-annotations.http": func(c *Client) error {
			var req AnnotationsRequest
			if err := json.Unmarshal(goldenBody(t, "request-ipam-annotations.http"), &req); err != nil {
				return err
			}
			_, err := c.IPAMAnnotations(context.Background(), req.Pod)
			return err
		},
		"request-return-outcome.http": func(c *Client) error {
			var o ReturnOutcome
			if err := json.Unmarshal(goldenBody(t, "request-return-outcome.http"), &o); err != nil {
				return err
			}
			return c.ReportReturn(context.Background(), &o)
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			got := capture(t, call)
			want := parseRequest(t, []byte(golden(t, name)))
			if got.Method != want.Method || got.URL.Path != want.URL.Path || !bytes.Equal(got.body, want.body) {
				t.Fatalf("sent %s %s %s\nthe previous release sent %s %s %s", got.Method, got.URL.Path, got.body, want.Method, want.URL.Path, want.body)
			}
			for k, v := range want.Header {
				if !reflect.DeepEqual(got.Header[k], v) {
					t.Errorf("header %s: %q, the previous release sent %q", k, got.Header[k], v)
				}
			}
			if got.Header.Get(VersionHeader) != strconv.Itoa(Version) {
				t.Errorf("%s: %q", VersionHeader, got.Header.Get(VersionHeader))
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]int{"": 1, "1": 1, "2": 2, "7": 7, "0": 0, "-1": 0, "x": 0, "2.0": 0} {
		got, err := ParseVersion(in)
		if got != want || (want == 0) != (err != nil) {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if CheckClient(1) != nil || CheckClient(Version+1) != nil {
		t.Fatal("a capo-ipam of wire v1 or a newer one is refused")
	}
}

// An answer that says no wire version capo-ipam can read is no answer:
// the DEL is journaled, as for an agent that is away.
func TestAgentVersionUnreadable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(VersionHeader, "zero")
		_, _ = w.Write([]byte(`{"outcome":"reserved"}`))
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, err = NewClient(sock).Reserve(context.Background(), &ReserveRequest{ContainerID: "c", Network: "n"})
	if err == nil || !strings.Contains(err.Error(), "not a wire version") {
		t.Fatalf("err = %v", err)
	}
}

type request struct {
	*http.Request
	body []byte
}

func parseRequest(t *testing.T, raw []byte) request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return request{r, body}
}

// capture returns the request call sends, as the agent receives it.
func capture(t *testing.T, call func(c *Client) error) request {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "a.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan request, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r, err := http.ReadRequest(bufio.NewReader(conn))
		if err != nil {
			return
		}
		body, _ := io.ReadAll(r.Body)
		got <- request{r, body}
		_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 22\r\n\r\n{\"outcome\":\"reserved\"}"))
	}()
	if err := call(NewClient(sock)); err != nil {
		t.Fatal(err)
	}
	return <-got
}

func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(previous, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func goldenBody(t *testing.T, name string) []byte {
	return parseRequest(t, []byte(golden(t, name))).body
}
