package journal

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/wire"
)

func TestPendingRoundTrip(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	r := &Record{
		Created: time.Now().UTC().Truncate(time.Second),
		Request: wire.ReserveRequest{ContainerID: "abc", IfName: "eth0", Network: "k8s-pod-network", Pod: wire.PodRef{Namespace: "n", Name: "p"}},
		Netconf: []byte(`{"name":"k8s-pod-network", "x": 1.50}`),
		Env:     map[string]string{"CNI_CONTAINERID": "abc"},
		Why:     "agent down",
	}
	name, err := d.Write(r)
	if err != nil {
		t.Fatal(err)
	}
	// A second DEL of the same sandbox rewrites the same record.
	if name2, err := d.Write(r); err != nil || name2 != name {
		t.Fatalf("second write: %s %v", name2, err)
	}
	if err := os.WriteFile(filepath.Join(d.Root, "pending", "junk.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := d.Pending()
	if err != nil || len(got) != 2 {
		t.Fatalf("pending: %v %v", got, err)
	}
	var ok, bad int
	for _, e := range got {
		if e.Err != nil {
			bad++
			continue
		}
		ok++
		if string(e.Record.Netconf) != string(r.Netconf) || e.Record.Request.Handle() != "k8s-pod-network.abc" || !e.Record.Created.Equal(r.Created) {
			t.Fatalf("round trip: %+v", e.Record)
		}
	}
	if ok != 1 || bad != 1 {
		t.Fatalf("ok %d bad %d", ok, bad)
	}
	if err := d.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(name); err != nil {
		t.Fatalf("second remove must be a no-op: %v", err)
	}
	if got, _ := d.Pending(); len(got) != 1 {
		t.Fatalf("after remove: %v", got)
	}
}

func TestAddrs(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	if d.Addrs("n", "c", "eth0") != nil {
		t.Fatal("nothing recorded yet")
	}
	if all, err := d.AddrRecords(); err != nil || all != nil {
		t.Fatalf("no records yet: %v %v", all, err)
	}
	rec := &AddrRecord{Network: "n", ContainerID: "c/../x", IfName: "eth0", Pod: wire.PodRef{Namespace: "kafka", Name: "b-0", UID: "u"}, IPs: []string{"10.0.0.1", "fd00::1"}}
	if err := d.RecordAddrs(rec); err != nil {
		t.Fatal(err)
	}
	if got := d.Addrs("n", "c/../x", "eth0"); !slices.Equal(got, []string{"10.0.0.1", "fd00::1"}) {
		t.Fatalf("got %v", got)
	}
	// A runtime that retries an ADD for the same sandbox writes it again.
	rec.IPs = []string{"10.0.0.2"}
	if err := d.RecordAddrs(rec); err != nil {
		t.Fatal(err)
	}
	if got := d.Addrs("n", "c/../x", "eth0"); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Fatalf("rewritten: got %v", got)
	}
	files, _ := os.ReadDir(filepath.Join(d.Root, "addrs"))
	if len(files) != 1 || filepath.Base(files[0].Name()) != files[0].Name() {
		t.Fatalf("unsafe name, or a file left beside the record: %v", files)
	}
	// A record cut short by a crash reads as no record: the DEL reads
	// Calico's handle instead.
	path := filepath.Join(d.Root, "addrs", files[0].Name())
	whole, _ := os.ReadFile(path)
	_ = os.WriteFile(path, whole[:len(whole)-1], 0o600)
	if got := d.AddrRecord("n", "c/../x", "eth0"); got != nil {
		t.Fatalf("a torn record read as %+v", got)
	}
	_ = os.WriteFile(path, whole, 0o600)
	// A file that is not a record (torn by a crash) is skipped, not fatal.
	if err := os.WriteFile(filepath.Join(d.Root, "addrs", "torn.json"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	all, err := d.AddrRecords()
	if err != nil || len(all) != 1 || all[0].Pod.Name != "b-0" || all[0].Handle() != "n.c/../x" {
		t.Fatalf("records: %+v %v", all, err)
	}
	if err := d.ForgetAddrs("n", "c/../x", "eth0"); err != nil || d.Addrs("n", "c/../x", "eth0") != nil {
		t.Fatal("forget failed")
	}
	if err := d.ForgetAddrs("n", "c/../x", "eth0"); err != nil {
		t.Fatal(err)
	}
}

func TestPendingOnMissingDir(t *testing.T) {
	got, err := Dir{Root: filepath.Join(t.TempDir(), "nope")}.Pending()
	if err != nil || got != nil {
		t.Fatalf("%v %v", got, err)
	}
}

func TestTeardownsOf(t *testing.T) {
	rec := func(ns, name, uid string) *Record {
		return &Record{Request: wire.ReserveRequest{Pod: wire.PodRef{Namespace: ns, Name: name, UID: uid}}}
	}
	entries := []Entry{
		{Name: "a", Record: rec("n", "web-0", "old")},
		{Name: "b", Record: rec("n", "web-1", "x")},
		{Name: "c", Err: os.ErrInvalid},
		{Name: "d", Record: rec("m", "web-0", "y")},
		{Name: "e", Record: rec("n", "web-0", "older")},
	}
	var got []string
	for _, e := range TeardownsOf(entries, wire.PodRef{Namespace: "n", Name: "web-0", UID: "new"}) {
		got = append(got, e.Name)
	}
	if !slices.Equal(got, []string{"a", "e"}) {
		t.Fatalf("got %v, want [a e]: the pod's own teardowns by namespace and name, whatever their UID", got)
	}
}
