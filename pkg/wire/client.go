package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client calls the agent over its unix socket.
type Client struct {
	Socket string
	http   *http.Client
}

// NewClient returns a client for the agent at socket.
func NewClient(socket string) *Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	return &Client{Socket: socket, http: &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}}
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
	var out AnnotationsResponse
	if err := c.call(ctx, AnnotationsPath, &AnnotationsRequest{Pod: pod}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReportReturn tells the agent how an offer of reserved addresses ended.
func (c *Client) ReportReturn(ctx context.Context, o *ReturnOutcome) error {
	return c.call(ctx, ReturnOutcomePath, o, &struct{}{})
}

// call posts in as JSON to path and decodes the answer into out.
func (c *Client) call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://capo-agent"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("capo-agent at %s unreachable after %s: %w", c.Socket, time.Since(start).Round(time.Millisecond), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("reading capo-agent's answer: %w", err)
	}
	if len(data) > MaxBodyBytes {
		return fmt.Errorf("capo-agent's answer exceeds %d bytes", MaxBodyBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var e ErrorResponse
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("capo-agent: %s", e.Error)
		}
		return fmt.Errorf("capo-agent answered %s", resp.Status)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("capo-agent's answer is not valid: %w", err)
	}
	return nil
}
