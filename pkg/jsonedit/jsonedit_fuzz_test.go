package jsonedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzFind: on any document and path, Find either fails with one of its
// errors or gives the span of exactly the value encoding/json finds there,
// and replacing that span touches nothing else.
func FuzzFind(f *testing.F) {
	f.Add([]byte(`{"name":"n", "plugins" : [ {"type":"calico","ipam":{ "type" : "calico-ipam" }} , {"type":"portmap","x":1.50e3} ], "z": true}`), "plugins/0/ipam")
	f.Add([]byte(`{"a":{"b":[1,"2",{"c":null}]}}`), "a/b/2/c")
	f.Add([]byte(`{"a":1,"a":2}`), "a")
	f.Add([]byte(`{"a":"\u0041\"}\\"}`), "a")
	f.Add([]byte(`[1,[2,[3]]]`), "1/1/0")
	f.Add([]byte(`{"a":1`), "a")
	f.Add([]byte(` {"A":1} `), "a")
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		steps := pathOf(path)
		s, e, err := Find(data, steps...)
		if err != nil {
			if json.Valid(data) == errors.Is(err, ErrInvalid) {
				t.Fatalf("valid %v but error %v", json.Valid(data), err)
			}
			return
		}
		if s < 0 || s > e || e > len(data) || !json.Valid(data[s:e]) {
			t.Fatalf("span [%d,%d) of %d bytes is not a value", s, e, len(data))
		}
		var doc, got any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data[s:e], &got); err != nil {
			t.Fatal(err)
		}
		if want, ok := walk(doc, steps); !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("span holds %v, encoding/json finds %v (%v)", got, want, ok)
		}
		if out := Replace(data, s, e, data[s:e]); !bytes.Equal(out, data) {
			t.Fatal("replacing a value with itself changed the document")
		}
		out := Replace(data, s, e, []byte(`null`))
		if !json.Valid(out) || !bytes.Equal(out[:s], data[:s]) || !bytes.Equal(out[s+4:], data[e:]) {
			t.Fatalf("replaced document %q", out)
		}
		if s2, e2, err := Find(out, steps...); err != nil || s2 != s || e2 != s+4 {
			t.Fatalf("the replaced value is not found where it was put: [%d,%d) %v", s2, e2, err)
		}
	})
}

// pathOf reads "a/0/b" as a path; a number is an index.
func pathOf(p string) []any {
	if p == "" {
		return nil
	}
	var out []any
	for _, s := range strings.Split(p, "/") {
		if i, err := strconv.Atoi(s); err == nil {
			out = append(out, i)
		} else {
			out = append(out, s)
		}
	}
	return out
}

// walk follows path through a value decoded by encoding/json, which keeps
// the last of duplicate keys: Find refuses those on the path.
func walk(v any, path []any) (any, bool) {
	for _, step := range path {
		switch step := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[step]; !ok {
				return nil, false
			}
		case int:
			a, ok := v.([]any)
			if !ok || step < 0 || step >= len(a) {
				return nil, false
			}
			v = a[step]
		}
	}
	return v, true
}
