package journal

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capo-net/capo/pkg/wire"
)

// The state directory is on the host: a crash can leave any bytes in a
// record, and anyone with the host's /var/lib/capo can write one.

// FuzzReadRecord: a pending record or an ADD record of any bytes is read
// as a record or as unreadable, never both, never a panic; a pending record
// that reads rewrites (Update) to the same record.
func FuzzReadRecord(f *testing.F) {
	good, _ := json.Marshal(sampleRecord("abc", "redis-0", "10.0.0.9"))
	addr, _ := json.Marshal(&AddrRecord{Network: "k8s-pod-network", ContainerID: "abc", IfName: "eth0", IPs: []string{"10.0.0.9"}, AtAdd: &wire.Decision{Selected: true, Rule: "r"}})
	f.Add(good)
	f.Add(addr)
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"version":1,"created":"not a time"}`))
	f.Add([]byte(`{"netconf":"not base64!"}`))
	f.Add([]byte(`{"containerID":""} {"containerID":"x"}`))
	f.Add([]byte(`null`))
	// One directory for every run: a fuzzing worker runs one input at a time.
	d := Dir{Root: f.TempDir()}
	for _, dir := range []string{d.pendingDir(), d.addrsDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dir := range []string{d.pendingDir(), d.addrsDir()} {
			if err := os.WriteFile(filepath.Join(dir, "x.json"), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got := readPending(t, d)
		if got.Err == nil {
			put(t, filepath.Join(d.pendingDir(), got.Name), got.Record)
			if again := readPending(t, d); again.Err != nil || !sameRecord(again.Record, got.Record) {
				t.Fatalf("a record read and rewritten reads otherwise: %+v %v", again.Record, again.Err)
			}
		}
		addrs, err := d.AddrRecords()
		if err != nil || len(addrs) > 1 {
			t.Fatalf("%d ADD records from one file: %v", len(addrs), err)
		}
		if len(addrs) == 1 && addrs[0].ContainerID == "" {
			t.Fatal("an ADD record without its sandbox")
		}
	})
}

// FuzzTornRecord: whatever a DEL or an ADD writes reads back as written,
// and the same file cut short anywhere reads as unreadable (pending) or as
// no record (ADD): never as a record that says something else.
func FuzzTornRecord(f *testing.F) {
	f.Add("abc", "redis-0", "10.0.0.9", uint(40))
	f.Add("0123456789abcdef0123", "kafka-1", "fd00::1", uint(0))
	f.Add("c", "p", "", uint(1000))
	f.Fuzz(func(t *testing.T, containerID, pod, ip string, cut uint) {
		if containerID == "" || !utf8.ValidString(containerID) || !utf8.ValidString(pod) || !utf8.ValidString(ip) {
			// encoding/json writes invalid UTF-8 as U+FFFD; libcni accepts
			// only [A-Za-z0-9_.-] container IDs, and Kubernetes names are ASCII.
			t.Skip()
		}
		d := Dir{Root: t.TempDir()}
		r := sampleRecord(containerID, pod, ip)
		name := key(r.Request.Network, containerID, r.Request.IfName)
		if err := os.MkdirAll(d.pendingDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		put(t, filepath.Join(d.pendingDir(), name), r)
		a := &AddrRecord{Network: r.Request.Network, ContainerID: containerID, IfName: "eth0", Pod: r.Request.Pod, IPs: []string{ip}, Created: r.Created}
		if err := d.RecordAddrs(a); err != nil {
			t.Fatal(err)
		}
		if got := readPending(t, d); got.Err != nil || got.Name != name || !sameRecord(got.Record, r) {
			t.Fatalf("record read back as %+v (%v), written %+v", got.Record, got.Err, r)
		}
		if got := d.AddrRecord(a.Network, containerID, "eth0"); got == nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("ADD record read back as %+v, written %+v", got, a)
		}
		for _, path := range []string{filepath.Join(d.pendingDir(), name), filepath.Join(d.addrsDir(), name)} {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data[:int(cut%uint(len(data)))], 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if got := readPending(t, d); got.Err == nil {
			t.Fatalf("a torn record reads as %+v", got.Record)
		}
		if got := d.AddrRecord(a.Network, containerID, "eth0"); got != nil {
			t.Fatalf("a torn ADD record reads as %+v", got)
		}
	})
}

// put writes r as Write and Update do, without their fsyncs: thousands of
// runs a second must not wait on the disk.
func put(t *testing.T, path string, r *Record) {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func sampleRecord(containerID, pod, ip string) *Record {
	return &Record{
		Version: 1,
		Created: time.Date(2026, 11, 21, 12, 0, 0, 123, time.UTC),
		Request: wire.ReserveRequest{
			ContainerID: containerID, IfName: "eth0", Network: "k8s-pod-network",
			Pod: wire.PodRef{Namespace: "ns", Name: pod, UID: "u1"}, RecordedIPs: []string{ip},
			AtAdd: &wire.Decision{Selected: true, Rule: "namespace label"},
		},
		Netconf: []byte(`{"name":"k8s-pod-network", "x": 1.50}`),
		Env:     map[string]string{"CNI_CONTAINERID": containerID, "CNI_ARGS": "K8S_POD_NAME=" + pod},
		Why:     "agent down",
	}
}

// readPending is the one pending entry, which is a record or unreadable.
func readPending(t *testing.T, d Dir) Entry {
	t.Helper()
	got, err := d.Pending()
	if err != nil || len(got) != 1 {
		t.Fatalf("%d pending entries from one file: %v", len(got), err)
	}
	if (got[0].Record == nil) == (got[0].Err == nil) {
		t.Fatalf("a pending entry must be a record or an error: %+v", got[0])
	}
	if got[0].Err != nil && !strings.Contains(got[0].Err.Error(), got[0].Name) {
		t.Fatalf("the error does not name the file: %v", got[0].Err)
	}
	return got[0]
}

// sameRecord compares records as encoding/json keeps them: times as
// instants, the netconf's bytes exactly.
func sameRecord(a, b *Record) bool {
	x, y := *a, *b
	x.Created, y.Created = time.Time{}, time.Time{}
	x.Netconf, y.Netconf = nil, nil
	return a.Created.Equal(b.Created) && bytes.Equal(a.Netconf, b.Netconf) && reflect.DeepEqual(x, y)
}
