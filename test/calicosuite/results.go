package calicosuite

import (
	"encoding/xml"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The states a spec ends in, as the table counts them.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
)

// The two ways the suite is run on each datastore.
const (
	PlainIPAM = "calico-ipam" // Calico as shipped
	CapoIPAM  = "capo-ipam"   // capo-ipam in front of calico-ipam
)

// Spec is one spec's end in one run. Name is ginkgo's full text, made
// unique within a run by a " #n" suffix where the suite repeats one.
type Spec struct {
	Name    string `json:"name"`
	State   string `json:"state"`
	Message string `json:"message,omitempty"` // the failure, on one line
}

// Run is one run of the suite.
type Run struct {
	Datastore string        `json:"datastore"`
	IPAM      string        `json:"ipam"`
	Specs     []Spec        `json:"specs"`
	Took      time.Duration `json:"took"`
	Err       string        `json:"err,omitempty"` // the run did not report
	// Retry holds, for a capo run, the specs run again on their own (a
	// fresh run focused on them): those that passed plain and not here.
	Retry     []Spec        `json:"retry,omitempty"`
	RetryTook time.Duration `json:"retryTook,omitempty"`
	// CachedAt is, for a plain run kept as a baseline, when it ran.
	CachedAt time.Time `json:"cachedAt,omitzero"`
}

// Count is how many of the run's specs ended in state.
func (r Run) Count(state string) int {
	n := 0
	for _, s := range r.Specs {
		if s.State == state {
			n++
		}
	}
	return n
}

// Names are the names of the run's specs that ended in state.
func (r Run) Names(state string) []string {
	var out []string
	for _, s := range r.Specs {
		if s.State == state {
			out = append(out, s.Name)
		}
	}
	return out
}

// junitSuite is the part of ginkgo v1's JUnit report the harness reads.
type junitSuite struct {
	Cases []struct {
		Name    string `xml:"name,attr"`
		Failure *struct {
			Message string `xml:",chardata"`
		} `xml:"failure"`
		Skipped *struct{} `xml:"skipped"`
	} `xml:"testcase"`
}

// ReadJUnit reads the specs from ginkgo's JUnit report at path.
func ReadJUnit(path string) ([]Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the suite wrote no report: %w", err)
	}
	var js junitSuite
	if err := xml.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("the suite's report %s: %w", path, err)
	}
	seen := map[string]int{}
	specs := make([]Spec, 0, len(js.Cases))
	for _, c := range js.Cases {
		s := Spec{Name: c.Name, State: Passed}
		if seen[c.Name]++; seen[c.Name] > 1 {
			s.Name = fmt.Sprintf("%s #%d", c.Name, seen[c.Name])
		}
		switch {
		case c.Failure != nil:
			s.State, s.Message = Failed, oneLine(c.Failure.Message, 240)
		case c.Skipped != nil:
			s.State = Skipped
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// duplicateSuffix is the " #n" ReadJUnit gave a repeated name, or "".
func duplicateSuffix(name string) string {
	i := strings.LastIndex(name, " #")
	if i < 0 {
		return ""
	}
	if _, err := strconv.Atoi(name[i+2:]); err != nil {
		return ""
	}
	return name[i:]
}

// oneLine is ginkgo's failure (where, what, where) on one line of at most
// n bytes, for a log line that names the spec.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// Table renders the runs as the docs show them, one row per run.
func Table(runs []Run) []string {
	out := []string{"| datastore | run | passed | failed | skipped | took |", "|---|---|---|---|---|---|"}
	for _, r := range runs {
		name := "plain calico-ipam"
		if !r.CachedAt.IsZero() {
			name += " (kept from " + r.CachedAt.Format(time.DateTime) + ")"
		}
		if r.IPAM == CapoIPAM {
			name = "capo-ipam in front"
		}
		out = append(out, fmt.Sprintf("| %s | %s | %d | %d | %d | %s |", r.Datastore, name, r.Count(Passed), r.Count(Failed), r.Count(Skipped), r.Took.Round(time.Second)))
	}
	return out
}
