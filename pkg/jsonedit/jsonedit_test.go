package jsonedit

import (
	"errors"
	"strings"
	"testing"
)

func TestFindAndReplace(t *testing.T) {
	doc := `{"name":"n", "plugins" : [ {"type":"calico","ipam":{ "type" : "calico-ipam" }} , {"type":"portmap","x":1.50e3} ], "z": true}`
	s, e, err := Find([]byte(doc), "plugins", 0, "ipam")
	if err != nil || doc[s:e] != `{ "type" : "calico-ipam" }` {
		t.Fatalf("%q %v", doc[s:e], err)
	}
	out := string(Replace([]byte(doc), s, e, []byte(`{"type":"capo-ipam"}`)))
	if want := strings.Replace(doc, `{ "type" : "calico-ipam" }`, `{"type":"capo-ipam"}`, 1); out != want {
		t.Fatalf("\n got %s\nwant %s", out, want)
	}
	if s, e, _ := Find([]byte(doc), "plugins", 1, "x"); doc[s:e] != "1.50e3" {
		t.Fatalf("number span %q", doc[s:e])
	}
	if s, e, _ := Find([]byte(doc)); doc[s:e] != doc {
		t.Fatal("an empty path is the whole document")
	}
}

func TestFindErrors(t *testing.T) {
	cases := []struct {
		doc  string
		path []any
		want string
	}{
		{`{"a":1`, []any{"a"}, "not valid JSON"},
		{`{"a":1}`, []any{"b"}, "not found"},
		{`{"a":[1]}`, []any{"a", 3}, "not found"},
		{`{"a":1}`, []any{"a", "b"}, "not an object"},
		{`{"a":{"b":1}}`, []any{"a", 0}, "not an array"},
		{`{"a":1,"a":2}`, []any{"a"}, "more than once"},
		{`{"a":1}`, []any{1.5}, "neither a key nor an index"},
	}
	for _, tc := range cases {
		_, _, err := Find([]byte(tc.doc), tc.path...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: err %v, want %q", tc.doc, tc.path, err, tc.want)
		}
	}
	if _, _, err := Find([]byte(`{}`), "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
}
