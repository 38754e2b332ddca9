package redact

import (
	"encoding/json"
	"testing"
)

// Any document: refused, or valid JSON with no PEM block left, that a
// second pass leaves as it is.
func FuzzJSON(f *testing.F) {
	f.Add([]byte(`{"plugins":[{"policy":{"k8s_auth_token":"t"},"etcd_key_file":"/k"}]}`))
	f.Add([]byte(`{"a":"-----BEGIN X-----\nabc\n-----END X-----","key":"v","b":[1,true,null]}`))
	f.Add([]byte(`["password: x\n  y", "k=v token=z"]`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, _, err := JSON(doc)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("not JSON:\n%s", out)
		}
		if pemBlock.Match(out) {
			t.Fatalf("a PEM block left:\n%s", out)
		}
		again, n, err := JSON(out)
		if err != nil || n != 0 || string(again) != string(out) {
			t.Fatalf("a second pass changes it (%d, %v):\n%s\n%s", n, err, out, again)
		}
	})
}
