package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSON gives doc back with its secrets replaced by Mark, keys in their
// order, indented for people to read; n counts the values replaced. A
// string that is not under a secret's key is read as text (it may hold a
// document of its own: a ConfigMap's conflist). doc that is not JSON is an
// error and nothing is returned: the caller withholds it.
func JSON(doc []byte) (out []byte, n int, err error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	w := &walker{dec: dec}
	if err := w.value(plain); err != nil {
		return nil, 0, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, 0, errors.New("not JSON: more than one value")
	}
	var ind bytes.Buffer
	if err := json.Indent(&ind, w.out.Bytes(), "", "  "); err != nil {
		return nil, 0, err
	}
	return ind.Bytes(), w.n, nil
}

// Value is v with its secrets replaced, as JSON: for what capo renders
// itself (objects it read), through encoding/json and JSON.
func Value(v any) ([]byte, int, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, 0, err
	}
	return JSON(b)
}

type walker struct {
	dec *json.Decoder
	out bytes.Buffer
	n   int
}

// value copies one value; under is the class of the key it sits under
// (inherited by everything inside it).
func (w *walker) value(under keyClass) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		return w.container(t, under)
	case string:
		if !keeps(under, t) {
			w.n++
			t = Mark
		} else if under == plain {
			t = w.text(t)
		}
		return w.write(t)
	default: // numbers, booleans, null: no secret
		return w.write(t)
	}
}

// container copies an object or an array whose opening delim was read.
func (w *walker) container(open json.Delim, under keyClass) error {
	opening, closing := byte('['), byte(']')
	if open == '{' {
		opening, closing = '{', '}'
	}
	w.out.WriteByte(opening)
	for i := 0; w.dec.More(); i++ {
		if i > 0 {
			w.out.WriteByte(',')
		}
		class := under
		if open == '{' {
			tok, err := w.dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			if err := w.write(key); err != nil {
				return err
			}
			w.out.WriteByte(':')
			class = max(under, classify(key))
		}
		if err := w.value(class); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil {
		return err
	}
	w.out.WriteByte(closing)
	return nil
}

func (w *walker) text(s string) string {
	out, n := Text([]byte(s))
	w.n += n
	return string(out)
}

// write encodes v as JSON without HTML escapes, so that Mark reads as
// itself.
func (w *walker) write(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return nil
}
