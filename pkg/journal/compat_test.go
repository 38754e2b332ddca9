package journal

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capo-net/capo/pkg/wire"
)

// previous is the last release's recording (pkg/wire/testdata/record).
const previous = "../wire/testdata/0.1.0"

// A DEL journaled by the previous release's capo-ipam, and its ADD record,
// are read by this agent in full; and this capo-ipam writes both, from the
// same inputs, byte for byte as the previous one did, so the previous
// agent (after a rollback) reads them as its own.
func TestPreviousReleasesRecords(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	old := readGolden(t, "journal-record.json")
	var rec Record
	if err := json.Unmarshal(old, &rec); err != nil {
		t.Fatal(err)
	}
	name, err := d.Write(&Record{Created: rec.Created, Request: rec.Request, Netconf: rec.Netconf, Env: rec.Env, Why: rec.Why})
	if err != nil {
		t.Fatal(err)
	}
	if mine := readFile(t, filepath.Join(d.pendingDir(), name)); !bytes.Equal(mine, old) {
		t.Fatalf("journal record changed format:\n%s\nthe previous release wrote\n%s", mine, old)
	}
	entries, err := d.Pending()
	if err != nil || len(entries) != 1 || entries[0].Err != nil {
		t.Fatalf("%+v %v", entries, err)
	}
	if r := entries[0].Record; r.Request.AtAdd == nil || r.Request.AtAdd.Owner == nil || len(r.Request.RecordedIPs) != 2 || r.Env["CNI_NETNS"] == "" || len(r.Netconf) == 0 {
		t.Fatalf("read back %+v", r)
	}

	oldAdd := readGolden(t, "add-record.json")
	var add AddrRecord
	if err := json.Unmarshal(oldAdd, &add); err != nil {
		t.Fatal(err)
	}
	if err := d.RecordAddrs(&add); err != nil {
		t.Fatal(err)
	}
	if mine := readFile(t, filepath.Join(d.addrsDir(), key(add.Network, add.ContainerID, add.IfName))); !bytes.Equal(mine, oldAdd) {
		t.Fatalf("ADD record changed format:\n%s\nthe previous release wrote\n%s", mine, oldAdd)
	}
	if r := d.AddrRecord(add.Network, add.ContainerID, add.IfName); r == nil || r.AtAdd == nil || len(r.IPs) != 2 || r.Pod.UID == "" {
		t.Fatalf("read back %+v", r)
	}
}

// A record of a newer format (an agent rolled back under a newer
// capo-ipam's journal) stays where it is, with a reason that says so.
func TestNewerRecordLeftInPlace(t *testing.T) {
	d := Dir{Root: t.TempDir()}
	name, err := d.Write(&Record{Created: time.Now(), Request: wire.ReserveRequest{Network: "n", ContainerID: "c", IfName: "eth0"}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.pendingDir(), name)
	data := bytes.Replace(readFile(t, path), []byte(`"version":1`), []byte(`"version":2`), 1)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	entries, err := d.Pending()
	if err != nil || len(entries) != 1 || entries[0].Err == nil || !strings.Contains(entries[0].Err.Error(), "newer capo-ipam") {
		t.Fatalf("%+v %v", entries, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal("the record is gone")
	}
}

func readGolden(t *testing.T, name string) []byte { return readFile(t, filepath.Join(previous, name)) }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
