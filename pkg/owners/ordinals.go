package owners

import (
	"fmt"
	"strconv"
	"strings"
)

// Ordinals are the members a StatefulSet-like set has: the first Replicas
// ordinals from Start that are not Reserved (Kruise's
// spec.reserveOrdinals: ordinals the set skips, whose pods it deletes).
type Ordinals struct {
	Start, Replicas int32
	Reserved        map[int]bool
}

// Has reports whether the set has member n.
func (o Ordinals) Has(n int) bool {
	if n < int(o.Start) || o.Reserved[n] {
		return false
	}
	skipped := 0
	for r := range o.Reserved {
		if r >= int(o.Start) && r < n {
			skipped++
		}
	}
	return n-int(o.Start)-skipped < int(o.Replicas)
}

// maxRange bounds one "a-b" item, against a typo holding the controller
// in a loop over millions of ordinals.
const maxRange = 100000

// ParseReserved reads Kruise's spec.reserveOrdinals as an unstructured
// object holds it: integers, and strings that are an integer or a range
// "a-b" (both ends included).
func ParseReserved(items []any) (map[int]bool, error) {
	out := map[int]bool{}
	for _, it := range items {
		switch v := it.(type) {
		case int64:
			out[int(v)] = true
		case float64:
			out[int(v)] = true
		case string:
			if err := parseRange(v, out); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("reserveOrdinals item %v: want an integer or a range such as \"3-5\"", it)
		}
	}
	return out, nil
}

func parseRange(s string, out map[int]bool) error {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	a, errA := strconv.Atoi(strings.TrimSpace(lo))
	b, errB := a, error(nil)
	if isRange {
		b, errB = strconv.Atoi(strings.TrimSpace(hi))
	}
	if errA != nil || errB != nil || a < 0 || b < a || b-a > maxRange {
		return fmt.Errorf("reserveOrdinals item %q: want an integer or a range such as \"3-5\"", s)
	}
	for n := a; n <= b; n++ {
		out[n] = true
	}
	return nil
}
