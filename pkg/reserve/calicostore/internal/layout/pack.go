package layout

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"fmt"
	"io"
	"sync"
)

// maxUnpacked bounds what a packed annotation may expand to, so a corrupt
// or hostile object cannot make capo allocate without limit.
const maxUnpacked = 4 << 20

// Deflate's writers (about 1 MiB of tables each) and readers are reused:
// a storm of writes, or a pass that decodes every bucket, would otherwise
// allocate one each time and grow the heap with garbage.
var (
	writers = sync.Pool{New: func() any {
		w, _ := flate.NewWriter(nil, flate.DefaultCompression) // fails only on a bad level
		return w
	}}
	readers = sync.Pool{New: func() any { return flate.NewReader(nil) }}
)

// pack deflates at the default level: on a bucket of 625 entries it comes
// within 1% of the best level's size at half its time, which every write pays.
func pack(text string) string {
	var buf bytes.Buffer
	w, _ := writers.Get().(*flate.Writer)
	w.Reset(&buf)
	_, _ = w.Write([]byte(text))
	_ = w.Close()
	writers.Put(w)
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func unpack(packed string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(packed)
	if err != nil {
		return "", fmt.Errorf("not base64: %w", err)
	}
	r, _ := readers.Get().(io.ReadCloser)
	reset, _ := r.(flate.Resetter) // flate.NewReader's readers are
	if err := reset.Reset(bytes.NewReader(raw), nil); err != nil {
		return "", fmt.Errorf("not deflate data: %w", err)
	}
	defer readers.Put(r)
	out, err := io.ReadAll(io.LimitReader(r, maxUnpacked+1))
	if err != nil {
		return "", fmt.Errorf("not deflate data: %w", err)
	}
	if len(out) > maxUnpacked {
		return "", fmt.Errorf("expands past %d bytes", maxUnpacked)
	}
	return string(out), nil
}
