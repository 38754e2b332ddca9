package layout

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/capo-net/capo/pkg/reserve"
)

// The annotation MetadataAnnotation holds one record per address. Fields
// are separated by '|' and records by ';': neither occurs in addresses,
// Kubernetes names, kinds or UIDs. The text is deflated and base64-encoded:
// Calico fetches and decodes every IPReservation on every pod ADD, so the
// bytes it carries are what capo costs everyone else, and base64 needs no
// JSON escaping (the Kubernetes datastore wraps annotations in JSON again).
//
// "z2:" (packed) and "v2;" (text) records carry the node and Seen, as
// bucket objects hold many nodes; "v3;" records (packed as "z2:" too) add
// the sandbox, and are written only when an entry has one, so objects
// without are read by capo releases that predate it. "z1:" and "v1;" are today's per-node
// objects, read for the migration. "retired" marks an object about to be
// deleted: no writer may put anything in it (older agents fail to decode
// it, which makes them journal instead of writing).
const (
	textV1      = "v1"
	textV2      = "v2"
	textV3      = "v3"
	packedV1    = "z1:"
	packedV2    = "z2:"
	retiredMark = "retired"
	fieldSep    = "|"
	recordSep   = ";"
	fieldsV1    = 9
	fieldsV2    = 11
	fieldsV3    = 12
)

// separators in a field become '_', which no Kubernetes name, UID or
// container ID has either: a pod name or container ID sent over the socket
// must not make the whole object unreadable (its length stays, for Limits).
var separators = strings.NewReplacer(fieldSep, "_", recordSep, "_")

// record is an entry in v2 text, or v3 with its sandbox. Zero times are
// empty fields; Seen is seconds after ReservedAt when both are set (a few
// digits, not ten).
func record(e reserve.Entry) string {
	if e.Sandbox != "" {
		return recordV2(e) + fieldSep + separators.Replace(e.Sandbox)
	}
	return recordV2(e)
}

func recordV2(e reserve.Entry) string {
	seen := unixText(e.Seen)
	if !e.Seen.IsZero() && !e.ReservedAt.IsZero() {
		seen = "+" + strconv.FormatInt(e.Seen.Unix()-e.ReservedAt.Unix(), 10)
	}
	return separated(
		e.IP, e.Node, e.Namespace, e.Pod, e.PodUID, e.Reason,
		unixText(e.ReservedAt), seen, e.OwnerKind, e.OwnerName, e.OwnerUID,
	)
}

func separated(fields ...string) string {
	for i, f := range fields {
		fields[i] = separators.Replace(f)
	}
	return strings.Join(fields, fieldSep)
}

func unixText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.Unix(), 10)
}

func parseUnix(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad time %q", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// parseRecord reads one record of either version; v1 records belong to
// the object's node and have never been seen by a controller.
func parseRecord(version, s string) (reserve.Entry, error) {
	f := strings.Split(s, fieldSep)
	if version == textV1 {
		if len(f) != fieldsV1 {
			return reserve.Entry{}, fmt.Errorf("record %q has %d fields, want %d", s, len(f), fieldsV1)
		}
		// ip ns pod poduid reason reservedAt kind name uid -> the v2 order
		f = []string{f[0], "", f[1], f[2], f[3], f[4], f[5], "", f[6], f[7], f[8]}
	}
	var sandbox string
	if version == textV3 {
		if len(f) != fieldsV3 {
			return reserve.Entry{}, fmt.Errorf("record %q has %d fields, want %d", s, len(f), fieldsV3)
		}
		sandbox, f = f[fieldsV3-1], f[:fieldsV2]
	}
	if len(f) != fieldsV2 {
		return reserve.Entry{}, fmt.Errorf("record %q has %d fields, want %d", s, len(f), fieldsV2)
	}
	at, err := parseUnix(f[6])
	if err != nil {
		return reserve.Entry{}, fmt.Errorf("record %q: %w", s, err)
	}
	seen, err := parseUnix(strings.TrimPrefix(f[7], "+"))
	if err != nil {
		return reserve.Entry{}, fmt.Errorf("record %q: %w", s, err)
	}
	if rel, ok := strings.CutPrefix(f[7], "+"); ok {
		if at.IsZero() || rel == "" {
			return reserve.Entry{}, fmt.Errorf("record %q: Seen relative to no time", s)
		}
		// In whole seconds: a Duration overflows past 292 years.
		seen = time.Unix(at.Unix()+seen.Unix(), 0).UTC()
	}
	return reserve.Entry{
		IP: f[0], Node: f[1], Namespace: f[2], Pod: f[3], PodUID: f[4], Reason: f[5],
		ReservedAt: at, Seen: seen, OwnerKind: f[8], OwnerName: f[9], OwnerUID: f[10], Sandbox: sandbox,
	}, nil
}

// encodeRecords renders entries, in the order given, as a packed v2
// annotation, or v3 when one has a sandbox: every record then has its
// sandbox field, empty where unknown.
func encodeRecords(entries []reserve.Entry) string {
	version := textV2
	for _, e := range entries {
		if e.Sandbox != "" {
			version = textV3
		}
	}
	parts := make([]string, 0, len(entries)+1)
	parts = append(parts, version)
	for _, e := range entries {
		r := record(e)
		if version == textV3 && e.Sandbox == "" {
			r += fieldSep
		}
		parts = append(parts, r)
	}
	return packedV2 + pack(strings.Join(parts, recordSep))
}

// encodeV1 renders entries in the per-node layout's format, which agents
// of that layout read: times always as numbers, no node, no Seen.
func encodeV1(entries []reserve.Entry) string {
	parts := make([]string, 0, len(entries)+1)
	parts = append(parts, textV1)
	for _, e := range entries {
		parts = append(parts, separated(
			e.IP, e.Namespace, e.Pod, e.PodUID, e.Reason,
			strconv.FormatInt(e.ReservedAt.Unix(), 10), e.OwnerKind, e.OwnerName, e.OwnerUID,
		))
	}
	return packedV1 + pack(strings.Join(parts, recordSep))
}

// parseRecords reads an annotation of any format. retired: the object is
// being deleted and holds nothing.
func parseRecords(ann string) (entries []reserve.Entry, retired bool, err error) {
	switch {
	case ann == "":
		return nil, false, nil
	case ann == retiredMark:
		return nil, true, nil
	case strings.HasPrefix(ann, packedV1), strings.HasPrefix(ann, packedV2):
		text, err := unpack(ann[len(packedV2):]) // both prefixes are 3 bytes
		if err != nil {
			return nil, false, fmt.Errorf("annotation %s: %w", MetadataAnnotation, err)
		}
		ann = text
	}
	parts := strings.Split(ann, recordSep)
	if parts[0] != textV1 && parts[0] != textV2 && parts[0] != textV3 {
		return nil, false, fmt.Errorf("annotation %s has unknown format %.10q", MetadataAnnotation, parts[0])
	}
	for _, p := range parts[1:] {
		e, err := parseRecord(parts[0], p)
		if err != nil {
			return nil, false, fmt.Errorf("annotation %s: %w", MetadataAnnotation, err)
		}
		entries = append(entries, e)
	}
	return entries, false, nil
}
