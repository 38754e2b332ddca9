// Package reserve keeps capo's reservations in Calico IPReservation objects,
// through libcalico-go so both datastores work the same.
//
// Calico lists every IPReservation on every pod ADD, so reservations are
// packed: one object per node (more shards only when one is full), never one
// per IP. Each reserved address carries compact metadata in one annotation.
package reserve

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// MetadataAnnotation holds one entry per reserved address.
	MetadataAnnotation = "capo.io/reservations"
	// NodeLabel names the node an object's reservations belong to: the label
	// for selecting (shortened past 63 characters), the annotation in full.
	NodeLabel = "capo.io/node"
	// ManagedByLabel marks capo's objects; others are never touched.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "capo"

	// Reasons an address was reserved.
	ReasonCNIDel   = "cni-del"
	ReasonNodeLost = "node-lost"
)

// Limits bound one object. On the Kubernetes datastore libcalico-go stores
// annotations again inside its own metadata annotation, and the API server
// caps annotations at 256 KiB per object: stay well under.
type Limits struct {
	MaxIPs             int
	MaxAnnotationBytes int
}

// DefaultLimits keeps the worst case under the cap: 160 KiB of text packs to
// at most about 214 KiB even if it did not compress at all.
var DefaultLimits = Limits{MaxIPs: 1000, MaxAnnotationBytes: 160 << 10}

// Entry is one reserved address and why.
type Entry struct {
	IP         string
	Node       string // from the object, not stored per entry
	Namespace  string
	Pod        string
	PodUID     string
	Reason     string
	ReservedAt time.Time
	OwnerKind  string // the pod's controller, e.g. StatefulSet
	OwnerName  string
	OwnerUID   string
}

// SetPod fills what the pod object tells: its UID and its controller.
func (e *Entry) SetPod(p *corev1.Pod) {
	if p == nil {
		return
	}
	e.PodUID = string(p.UID)
	if ref := metav1.GetControllerOf(p); ref != nil {
		e.OwnerKind, e.OwnerName, e.OwnerUID = ref.Kind, ref.Name, string(ref.UID)
	}
}

// Fields are separated by '|' and entries by ';': none can occur in IPs,
// Kubernetes names, kinds or UIDs. The text is deflated and base64-encoded
// ("z1:" prefix): Calico fetches and decodes every IPReservation on every
// pod ADD, so the bytes it carries are what capo costs everyone else.
// Base64 needs no JSON escaping, which matters because the Kubernetes
// datastore wraps annotations in JSON again. Plain "v1;" text is read too.
const (
	formatV1   = "v1"
	packedV1   = "z1:"
	fieldSep   = "|"
	entrySep   = ";"
	entryField = 9
)

func (e *Entry) encode() string {
	return strings.Join([]string{e.IP, e.Namespace, e.Pod, e.PodUID, e.Reason,
		strconv.FormatInt(e.ReservedAt.Unix(), 10), e.OwnerKind, e.OwnerName, e.OwnerUID}, fieldSep)
}

func decodeEntry(s string) (Entry, error) {
	f := strings.Split(s, fieldSep)
	if len(f) != entryField {
		return Entry{}, fmt.Errorf("entry %q has %d fields, want %d", s, len(f), entryField)
	}
	sec, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("entry %q: bad time: %w", s, err)
	}
	return Entry{IP: f[0], Namespace: f[1], Pod: f[2], PodUID: f[3], Reason: f[4],
		ReservedAt: time.Unix(sec, 0).UTC(), OwnerKind: f[6], OwnerName: f[7], OwnerUID: f[8]}, nil
}

// shard is the content of one object: reserved addresses, with metadata.
type shard struct {
	entries map[string]Entry // by IP
}

// decodeShard reads an object's CIDRs and annotation. The CIDR list is what
// Calico enforces, so it wins: an address without metadata (added by hand)
// is kept with empty metadata; metadata without an address is dropped.
func decodeShard(node string, cidrs []string, annotation string) (*shard, error) {
	meta := map[string]Entry{}
	if packed, ok := strings.CutPrefix(annotation, packedV1); ok {
		text, err := unpack(packed)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", MetadataAnnotation, err)
		}
		annotation = text
	}
	if annotation != "" {
		parts := strings.Split(annotation, entrySep)
		if parts[0] != formatV1 {
			return nil, fmt.Errorf("annotation %s has unknown format %q", MetadataAnnotation, parts[0])
		}
		for _, p := range parts[1:] {
			e, err := decodeEntry(p)
			if err != nil {
				return nil, err
			}
			meta[e.IP] = e
		}
	}
	s := &shard{entries: map[string]Entry{}}
	for _, c := range cidrs {
		ip := cidrIP(c)
		e, ok := meta[ip]
		if !ok {
			e = Entry{IP: ip}
		}
		e.Node = node
		s.entries[ip] = e
	}
	return s, nil
}

// encode renders the shard as a sorted CIDR list and the packed annotation.
func (s *shard) encode() (cidrs []string, annotation string) {
	cidrs, text := s.encodeText()
	return cidrs, packedV1 + pack(text)
}

// encodeText is the annotation before packing.
func (s *shard) encodeText() (cidrs []string, annotation string) {
	ips := make([]string, 0, len(s.entries))
	for ip := range s.entries {
		ips = append(ips, ip)
	}
	slices.SortFunc(ips, compareIP)
	parts := make([]string, 0, len(ips)+1)
	parts = append(parts, formatV1)
	for _, ip := range ips {
		e := s.entries[ip]
		cidrs = append(cidrs, hostCIDR(ip))
		parts = append(parts, e.encode())
	}
	return cidrs, strings.Join(parts, entrySep)
}

// size is the annotation's length before packing. Budgets count these bytes:
// packing only shrinks text like this, and even for incompressible text
// base64 grows it by a third, which DefaultLimits leaves room for.
func (s *shard) size() int {
	n := len(formatV1)
	for _, e := range s.entries {
		n += len(entrySep) + len(e.encode())
	}
	return n
}

// fits reports whether e can join the shard within the limits.
func (s *shard) fits(e Entry, l Limits, size int) bool {
	return len(s.entries) < l.MaxIPs && size+len(entrySep)+len(e.encode()) <= l.MaxAnnotationBytes
}

// ShardName is the name of a node's i-th object. Names past the 253-byte
// object name limit are shortened with a hash.
func ShardName(node string, i int) string {
	name := "capo-" + node
	if len(name) > 230 {
		sum := sha256.Sum256([]byte(node))
		name = name[:200] + "-" + hex.EncodeToString(sum[:8])
	}
	if i > 0 {
		name += "-s" + strconv.Itoa(i)
	}
	return name
}

// hostCIDR turns an address into the single-address CIDR Calico stores.
func hostCIDR(ip string) string {
	if strings.Contains(ip, ":") {
		return ip + "/128"
	}
	return ip + "/32"
}

// cidrIP is the address of a single-address CIDR (or the CIDR itself, for
// wider ones an operator may have added by hand).
func cidrIP(c string) string {
	ip, n, err := net.ParseCIDR(c)
	if err != nil {
		return c
	}
	if ones, bits := n.Mask.Size(); ones != bits {
		return c
	}
	return ip.String()
}

func compareIP(a, b string) int {
	x, y := net.ParseIP(a), net.ParseIP(b)
	if x == nil || y == nil {
		return strings.Compare(a, b)
	}
	if x4, y4 := x.To4(), y.To4(); (x4 == nil) != (y4 == nil) {
		if x4 != nil {
			return -1
		}
		return 1
	}
	return slices.Compare(x.To16(), y.To16())
}
