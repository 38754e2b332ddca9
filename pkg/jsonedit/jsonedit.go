// Package jsonedit changes one value inside a JSON document and leaves
// every other byte as it was: key order, spacing, number spellings and keys
// nobody here knows about all survive. CNI configs are edited this way, so
// what reaches Calico, and what an uninstall gives back, is what its author
// wrote.
package jsonedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

var (
	// ErrNotFound means a key or index on the path is absent.
	ErrNotFound = errors.New("not found in the document")
	// ErrDuplicateKey means a key on the path appears more than once.
	ErrDuplicateKey = errors.New("appears more than once")
	// ErrWrongKind means a step met an array where it wanted an object, or
	// the other way round, or a scalar.
	ErrWrongKind = errors.New("wrong kind of value")
	// ErrInvalid means the document is not valid JSON.
	ErrInvalid = errors.New("not valid JSON")
)

// Find returns the byte span [start, end) of the value at path; object keys
// are strings, array indexes ints. A key present twice is an error: which
// one a reader honours is not something to guess.
func Find(data []byte, path ...any) (start, end int, err error) {
	if !json.Valid(data) {
		var v any
		return 0, 0, fmt.Errorf("%w: %v", ErrInvalid, json.Unmarshal(data, &v))
	}
	start, end = 0, len(data)
	for _, p := range path {
		s, e, err := child(data[start:end], p)
		if err != nil {
			return 0, 0, fmt.Errorf("%v: %w", p, err)
		}
		start, end = start+s, start+e
	}
	return start, end, nil
}

// child finds one step of a path inside a single JSON value.
func child(value []byte, step any) (int, int, error) {
	dec := json.NewDecoder(bytes.NewReader(value))
	tok, err := dec.Token()
	if err != nil {
		return 0, 0, err
	}
	delim, _ := tok.(json.Delim)
	key, wantKey := step.(string)
	idx, wantIdx := step.(int)
	switch {
	case wantKey && delim != '{':
		return 0, 0, fmt.Errorf("%w: not an object", ErrWrongKind)
	case wantIdx && delim != '[':
		return 0, 0, fmt.Errorf("%w: not an array", ErrWrongKind)
	case !wantKey && !wantIdx:
		return 0, 0, fmt.Errorf("path step %T is neither a key nor an index", step)
	}
	found, start, end := false, 0, 0
	for i := 0; dec.More(); i++ {
		var name any
		if wantKey {
			if name, err = dec.Token(); err != nil {
				return 0, 0, err
			}
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, err
		}
		if (wantKey && name == key) || (wantIdx && i == idx) {
			if found {
				return 0, 0, fmt.Errorf("key %q %w", key, ErrDuplicateKey)
			}
			found = true
			end = int(dec.InputOffset())
			start = end - len(raw)
		}
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return 0, 0, err
	}
	if !found {
		return 0, 0, ErrNotFound
	}
	return start, end, nil
}

// Replace returns data with [start, end) replaced by with.
func Replace(data []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(data)-(end-start)+len(with))
	out = append(out, data[:start]...)
	out = append(out, with...)
	return append(out, data[end:]...)
}
