// Package journal holds capo-ipam's on-host records: the DELs it could not
// hand to the agent (pending; only reserve-then-release removes one) and the
// addresses each ADD was given.
package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/fsutil"
	"github.com/capo-net/capo/pkg/wire"
)

// DefaultStateDir is the host directory both capo-ipam and the agent use.
const DefaultStateDir = "/var/lib/capo"

// Record is a DEL the agent has not yet seen. It carries everything needed
// to replay the release exactly as the runtime asked for it.
type Record struct {
	Version  int                 `json:"version"`
	Created  time.Time           `json:"created"`
	Request  wire.ReserveRequest `json:"request"`
	Netconf  []byte              `json:"netconf"` // capo-ipam's stdin, byte for byte
	Env      map[string]string   `json:"env"`     // CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH
	Why      string              `json:"why"`     // what kept the agent from answering
	Attempts int                 `json:"attempts,omitempty"`
}

// RecordVersion is the journal record format capo-ipam writes and the
// newest the agent reads. A new format must be read by the release before
// it (docs/releasing.md); an agent of an older release leaves a record of
// a newer format in place, its address allocated, and says so.
const RecordVersion = 1

// TeardownsOf are the entries that are journaled DELs of pod, matched by
// namespace and name, not UID: a StatefulSet's member comes back under its
// name with a new UID, and its predecessor's teardown is the one it waits
// for (capo-ipam's ADD) and the agent replays first (its drainer).
// Unreadable entries never match.
func TeardownsOf(entries []Entry, pod wire.PodRef) []Entry {
	var out []Entry
	for _, e := range entries {
		if e.Record != nil && e.Record.Request.Pod.Namespace == pod.Namespace && e.Record.Request.Pod.Name == pod.Name {
			out = append(out, e)
		}
	}
	return out
}

// Dir is one state directory.
type Dir struct{ Root string }

func (d Dir) pendingDir() string { return filepath.Join(d.Root, "pending") }
func (d Dir) addrsDir() string   { return filepath.Join(d.Root, "addrs") }

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// key names a sandbox's interface on a network; deterministic, so a second
// DEL of the same sandbox rewrites the same record.
func key(network, containerID, ifName string) string {
	return unsafeChars.ReplaceAllString(network+"_"+containerID+"_"+ifName, "-") + ".json"
}

// Write stores r durably. It returns only once the record would survive a
// crash.
func (d Dir) Write(r *Record) (string, error) {
	if err := os.MkdirAll(d.pendingDir(), 0o700); err != nil {
		return "", err
	}
	r.Version = RecordVersion
	data, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	name := key(r.Request.Network, r.Request.ContainerID, r.Request.IfName)
	return name, fsutil.WriteFileAtomic(filepath.Join(d.pendingDir(), name), data, 0o600)
}

// Entry is a pending record as listed.
type Entry struct {
	Name   string
	Record *Record
	Err    error // the file exists but cannot be read; it stays for an operator
}

// Pending lists the records, sorted by name.
func (d Dir) Pending() ([]Entry, error) {
	files, err := os.ReadDir(d.pendingDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, f := range files {
		if f.IsDir() || !strings.HasSuffix(f.Name(), ".json") {
			continue
		}
		e := Entry{Name: f.Name(), Record: &Record{}}
		data, err := os.ReadFile(filepath.Join(d.pendingDir(), f.Name()))
		if err == nil {
			err = json.Unmarshal(data, e.Record)
		}
		if err == nil && e.Record.Version > RecordVersion {
			err = fmt.Errorf("written by a newer capo-ipam (record version %d, this agent reads up to %d): left in place with its address allocated until the release that wrote it is back on the node", e.Record.Version, RecordVersion)
		}
		if err != nil {
			e.Record, e.Err = nil, fmt.Errorf("journal record %s unreadable: %w", f.Name(), err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Has reports whether the pending record name is still there.
func (d Dir) Has(name string) bool {
	_, err := os.Stat(filepath.Join(d.pendingDir(), name))
	return err == nil
}

// Update rewrites a pending record (its attempt count).
func (d Dir) Update(name string, r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(d.pendingDir(), name), data, 0o600)
}

// Remove deletes a pending record once its reserve and release both succeeded.
func (d Dir) Remove(name string) error {
	if err := os.Remove(filepath.Join(d.pendingDir(), name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsutil.SyncDir(d.pendingDir())
}

// AddrRecord is what capo-ipam notes at ADD: the addresses the delegate
// assigned, and the sandbox and pod they belong to. capo-ipam's DEL removes
// it after the release; one whose Calico handle is gone while the record
// stays is a teardown that went around capo-ipam.
type AddrRecord struct {
	Network     string      `json:"network"`
	ContainerID string      `json:"containerID"`
	IfName      string      `json:"ifName"`
	Pod         wire.PodRef `json:"pod"`
	IPs         []string    `json:"ips"`
	Created     time.Time   `json:"created"`
	// AtAdd is the agent's decision for the pod at ADD, when it gave one.
	AtAdd *wire.Decision `json:"atAdd,omitempty"`
}

// Handle is Calico's IPAM handle for the sandbox.
func (r *AddrRecord) Handle() string { return r.Network + "." + r.ContainerID }

// RecordAddrs notes an ADD. The record is a hint, not a promise: without it
// (a crash lost it, or cut it short) the DEL reads Calico's handle, and every
// reader skips a record it cannot parse. So the ADD, which every pod start
// waits for, pays for no fsync and no temporary file and rename: one write
// to the sandbox's own file, which nothing else writes.
func (d Dir) RecordAddrs(r *AddrRecord) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	path := filepath.Join(d.addrsDir(), key(r.Network, r.ContainerID, r.IfName))
	err = os.WriteFile(path, data, 0o600)
	if errors.Is(err, fs.ErrNotExist) { // the first record on this node
		if err := os.MkdirAll(d.addrsDir(), 0o700); err != nil {
			return err
		}
		err = os.WriteFile(path, data, 0o600)
	}
	return err
}

// Addrs returns the addresses RecordAddrs stored, or nil.
func (d Dir) Addrs(network, containerID, ifName string) []string {
	if r := d.AddrRecord(network, containerID, ifName); r != nil {
		return r.IPs
	}
	return nil
}

// AddrRecord returns what RecordAddrs stored, or nil.
func (d Dir) AddrRecord(network, containerID, ifName string) *AddrRecord {
	return readAddrRecord(filepath.Join(d.addrsDir(), key(network, containerID, ifName)))
}

// AddrRecords lists every ADD record that can be read.
func (d Dir) AddrRecords() ([]*AddrRecord, error) {
	files, err := os.ReadDir(d.addrsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*AddrRecord
	for _, f := range files {
		if f.IsDir() || !strings.HasSuffix(f.Name(), ".json") {
			continue
		}
		if r := readAddrRecord(filepath.Join(d.addrsDir(), f.Name())); r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

func readAddrRecord(path string) *AddrRecord {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var r AddrRecord
	if json.Unmarshal(data, &r) != nil || r.ContainerID == "" {
		return nil
	}
	return &r
}

// ForgetAddrs removes the ADD record once the addresses are released.
func (d Dir) ForgetAddrs(network, containerID, ifName string) error {
	err := os.Remove(filepath.Join(d.addrsDir(), key(network, containerID, ifName)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveAddrRecords removes every ADD record: capo is leaving the node and
// nothing will read them again.
func (d Dir) RemoveAddrRecords() error {
	return os.RemoveAll(d.addrsDir())
}
