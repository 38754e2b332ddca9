// Command echo is the real-node bed's client/server workload. As a server
// (-serve) it answers every TCP connection with one line naming itself: the
// pod's name (its host name) and UID (POD_UID, from the downward API), so
// a client can tell which pod, and which incarnation of it, holds an
// address. As a client it dials once (-dial) or keeps dialling (-probe),
// one line per attempt, for the test to read in the pod's log. With -get
// it fetches each URL over HTTP once, prints what it got and exits.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type config struct {
	serve, dial, probe, get string
	every, timeout          time.Duration
	allocMiB                int    // memory to hold, so that a kubelet ranks the pod first for eviction
	allocOn                 string // hold it only on this host name (one member of a StatefulSet)
}

func main() {
	var c config
	flag.StringVar(&c.serve, "serve", "", "listen on this address and answer with the pod's name and UID")
	flag.StringVar(&c.dial, "dial", "", "dial this address once, print the answer, exit non-zero on failure")
	flag.StringVar(&c.probe, "probe", "", "dial this address every -every, logging each outcome")
	flag.StringVar(&c.get, "get", "", "comma-separated URLs: GET each once, print its status and body, exit")
	flag.DurationVar(&c.every, "every", 100*time.Millisecond, "interval between probes")
	flag.DurationVar(&c.timeout, "timeout", time.Second, "deadline of one connection")
	flag.IntVar(&c.allocMiB, "alloc-mib", 0, "MiB of memory to hold")
	flag.StringVar(&c.allocOn, "alloc-on", "", "hold -alloc-mib only when the host name is this (a pod's name)")
	flag.Parse()
	os.Exit(run(c))
}

func run(c config) int {
	switch {
	case c.get != "":
		for _, url := range strings.Split(c.get, ",") {
			fmt.Printf("GET %s %s\n", url, get(url, c.timeout))
		}
		return 0
	case c.dial != "":
		answer, err := ask(c.dial, c.timeout)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(answer)
		return 0
	case c.probe != "":
		go probe(c)
	case c.serve != "":
		hold(c)
		if err := serve(c.serve); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	return 0
}

var held [][]byte // kept reachable so the memory stays resident

func hold(c config) {
	if host, _ := os.Hostname(); c.allocMiB == 0 || (c.allocOn != "" && c.allocOn != host) {
		return
	}
	for range c.allocMiB {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 1
		}
		held = append(held, b)
	}
	fmt.Printf("holding %d MiB\n", c.allocMiB)
}

func serve(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	line := host + " " + os.Getenv("POD_UID") + "\n"
	fmt.Printf("serving %s as %s", addr, line)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte(line))
			conn.Close()
		}
	}()
	return nil
}

// probe logs "<unix ms> answer <name> <uid>" or "<unix ms> fail <reason>".
func probe(c config) {
	for {
		answer, err := ask(c.probe, c.timeout)
		now := time.Now().UnixMilli()
		if err != nil {
			fmt.Printf("%d fail %s\n", now, strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Printf("%d answer %s\n", now, answer)
		}
		time.Sleep(c.every)
	}
}

func ask(addr string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// get is "<status> <body>" of a GET of url, or "error <reason>".
func get(url string, timeout time.Duration) string {
	resp, err := (&http.Client{Timeout: timeout}).Get(url)
	if err != nil {
		return "error " + err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "error reading the body: " + err.Error()
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, body)
}
