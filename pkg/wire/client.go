package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// Client calls the agent over its unix socket.
//
// It writes its HTTP/1.0 requests and reads the answers itself rather than
// through net/http: capo-ipam runs once per pod start and stop, and linking
// net/http (with crypto/tls) costs every run its package initialisation and
// a megabyte or two of resident pages, and every call a transport's
// goroutines. One request per connection, closed by the agent after its
// answer, is all the protocol there is.
type Client struct {
	Socket string
	// AgentVersion is the wire version of the agent's last answer (1 for
	// an agent that sends none); 0 before any.
	AgentVersion int
}

// NewClient returns a client for the agent at socket.
func NewClient(socket string) *Client {
	return &Client{Socket: socket}
}

// Reserve sends req and waits for the answer until ctx ends.
func (c *Client) Reserve(ctx context.Context, req *ReserveRequest) (*ReserveResponse, error) {
	var out ReserveResponse
	if err := c.call(ctx, ReservePath, req, &out); err != nil {
		return nil, err
	}
	switch out.Outcome {
	case Reserved, NotSelected, NodeNotOptedIn, NothingToReserve:
		return &out, nil
	}
	return nil, fmt.Errorf("capo-agent answered an unknown outcome %q", out.Outcome)
}

// IPAMAnnotations asks for a pod's Calico IPAM annotations.
func (c *Client) IPAMAnnotations(ctx context.Context, pod PodRef) (*AnnotationsResponse, error) {
	return c.IPAMAnnotationsFor(ctx, &AnnotationsRequest{Pod: pod})
}

// IPAMAnnotationsFor asks for them with the whole request: the network
// too, which an offer that frees a predecessor's allocation needs.
func (c *Client) IPAMAnnotationsFor(ctx context.Context, req *AnnotationsRequest) (*AnnotationsResponse, error) {
	var out AnnotationsResponse
	if err := c.call(ctx, AnnotationsPath, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReportReturn tells the agent how an offer of reserved addresses ended.
func (c *Client) ReportReturn(ctx context.Context, o *ReturnOutcome) error {
	return c.call(ctx, ReturnOutcomePath, o, &struct{}{})
}

// call posts in as JSON to path and decodes the answer into out. Whatever
// keeps the answer from arriving whole before ctx ends (no agent, a closed
// connection, the deadline) says the agent is unreachable.
func (c *Client) call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	start := time.Now()
	status, header, data, err := c.roundTrip(ctx, path, body)
	if errors.Is(err, errTooLarge) {
		return err
	}
	if err != nil {
		return fmt.Errorf("capo-agent at %s unreachable after %s: %w", c.Socket, time.Since(start).Round(time.Millisecond), err)
	}
	v, err := ParseVersion(header.Get(VersionHeader))
	if err == nil {
		err = checkAgent(v)
	}
	if err != nil {
		return err
	}
	c.AgentVersion = v
	if status != "200" {
		a := &AnswerError{Status: status}
		var e ErrorResponse
		if json.Unmarshal(data, &e) == nil {
			a.Msg = e.Error
		}
		return a
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("capo-agent's answer is not valid: %w", err)
	}
	return nil
}

// AnswerError is an answer of the agent other than a decision: the agent
// was reached, and said why it did not decide (a refusal, a failure, a
// wire version it does not answer). Unreachable is another error.
type AnswerError struct {
	Status string // the HTTP status code, "403"
	Msg    string // the agent's words; "" when it gave none
}

func (e *AnswerError) Error() string {
	if e.Msg != "" {
		return "capo-agent: " + e.Msg
	}
	return "capo-agent answered " + e.Status
}

// Refused says the agent refused the request as not capo-ipam's own: it
// names another pod than the one the node's CNI state names.
func (e *AnswerError) Refused() bool { return e.Status == "403" }

// errTooLarge is an answer over MaxBodyBytes.
var errTooLarge = fmt.Errorf("capo-agent's answer exceeds %d bytes", MaxBodyBytes)

// roundTrip sends one request on a new connection and returns the answer's
// status code, headers and body.
func (c *Client) roundTrip(ctx context.Context, path string, body []byte) (string, textproto.MIMEHeader, []byte, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return "", nil, nil, err
	}
	defer conn.Close()
	if err := trustedPeer(conn, c.Socket); err != nil {
		return "", nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	head := "POST " + path + " HTTP/1.0\r\nHost: capo-agent\r\nContent-Type: application/json\r\n" +
		VersionHeader + ": " + strconv.Itoa(Version) + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		return "", nil, nil, err
	}
	tp := textproto.NewReader(bufio.NewReader(conn))
	line, err := tp.ReadLine()
	if err != nil {
		return "", nil, nil, err
	}
	proto, status, _ := strings.Cut(line, " ")
	if !strings.HasPrefix(proto, "HTTP/1.") || len(status) < 3 {
		return "", nil, nil, fmt.Errorf("not an HTTP answer: %.80q", line)
	}
	header, err := tp.ReadMIMEHeader()
	if err != nil {
		return "", nil, nil, err
	}
	// A length says where the answer ends; without one it ends when the
	// agent closes the connection, as an HTTP/1.0 answer may.
	want := int64(-1)
	if cl := header.Get("Content-Length"); cl != "" {
		if want, err = strconv.ParseInt(cl, 10, 64); err != nil || want < 0 {
			return "", nil, nil, fmt.Errorf("bad Content-Length %q", cl)
		}
	}
	if want > MaxBodyBytes {
		return "", nil, nil, errTooLarge
	}
	if want >= 0 {
		data := make([]byte, want)
		if n, err := io.ReadFull(tp.R, data); err != nil {
			return "", nil, nil, fmt.Errorf("the answer ended after %d of %d bytes: %w", n, want, err)
		}
		return status[:3], header, data, nil
	}
	data, err := io.ReadAll(io.LimitReader(tp.R, MaxBodyBytes+1))
	if err != nil {
		return "", nil, nil, err
	}
	if len(data) > MaxBodyBytes {
		return "", nil, nil, errTooLarge
	}
	return status[:3], header, data, nil
}
