// Command gate reads govulncheck's -json stream on stdin and fails when a
// reachable advisory (one whose vulnerable function the code calls) is
// neither fixed nor recorded in SECURITY.md: an advisory with a fix is
// fixed by a bump; one that cannot be (no fix, or a fix only past a pin
// capo must keep) is recorded there, with why.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
)

type finding struct {
	OSV          string `json:"osv"`
	FixedVersion string `json:"fixed_version"`
	Trace        []struct {
		Module   string `json:"module"`
		Version  string `json:"version"`
		Function string `json:"function"`
	} `json:"trace"`
}

func main() {
	security := flag.String("recorded", "SECURITY.md", "the file that records the advisories that cannot be fixed")
	flag.Parse()
	if err := run(os.Stdin, *security); err != nil {
		fmt.Fprintln(os.Stderr, "vuln:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, security string) error {
	text, err := os.ReadFile(security)
	if err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, id := range regexp.MustCompile(`GO-\d{4}-\d+`).FindAllString(string(text), -1) {
		recorded[id] = true
	}
	reachable := map[string]finding{}
	dec := json.NewDecoder(in)
	for {
		var msg struct {
			Finding *finding `json:"finding"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("reading govulncheck's output: %w", err)
		}
		if f := msg.Finding; f != nil && len(f.Trace) > 0 && f.Trace[0].Function != "" {
			reachable[f.OSV] = *f
		}
	}
	ids := make([]string, 0, len(reachable))
	for id := range reachable {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	failed := 0
	for _, id := range ids {
		f := reachable[id]
		where := f.Trace[0].Module + "@" + f.Trace[0].Version
		switch {
		case recorded[id]:
			fmt.Printf("%s in %s: reachable, recorded in %s\n", id, where, security)
		case f.FixedVersion != "":
			failed++
			fmt.Printf("%s in %s: reachable, fixed in %s: bump it\n", id, where, f.FixedVersion)
		default:
			failed++
			fmt.Printf("%s in %s: reachable, no fix: record it in %s, with why\n", id, where, security)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d reachable advisories neither fixed nor recorded", failed)
	}
	fmt.Printf("%d reachable advisories, each recorded in %s\n", len(ids), security)
	return nil
}
