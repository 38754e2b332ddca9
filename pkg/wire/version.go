package wire

import (
	"fmt"
	"strconv"
)

// The wire is a versioned contract between capo-ipam on a host and the
// agent on the same node, which may come from different releases for a
// while during an upgrade or a rollback (docs/operations.md#upgrade).
//
//   - Each side sends the version it speaks in VersionHeader; capo 0.1.0
//     sent none, which means 1.
//   - A newer side speaks the older one's version: the agent answers a
//     capo-ipam in the version of its request, and capo-ipam sends an older
//     agent nothing it needs understood (a field an agent ignores is never
//     one a reservation depends on: JSON's unknown fields are ignored).
//   - Whatever either side cannot use is answered by the fallback that
//     holds every address: a capo-ipam that gets no answer it can use
//     journals the DEL, and every agent replays the journal, reserving
//     before it releases. So skew can slow a teardown, never lose a
//     reservation and never block it.
const (
	// Version is the wire version this build speaks. 1: capo 0.1.0. 2: the
	// version header.
	Version = 2
	// MinAgentVersion is the oldest agent capo-ipam takes an answer from.
	MinAgentVersion = 1
	// MinClientVersion is the oldest capo-ipam the agent answers; an older
	// one gets 400 and journals.
	MinClientVersion = 1
	// VersionHeader carries the sender's wire version, both ways.
	VersionHeader = "Capo-Wire-Version"
)

// ParseVersion reads VersionHeader's value; an absent header is version 1
// (capo 0.1.0 sent none).
func ParseVersion(s string) (int, error) {
	if s == "" {
		return 1, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%s %q is not a wire version", VersionHeader, s)
	}
	return v, nil
}

// CheckClient says why the agent will not answer a capo-ipam of version v,
// or nil.
func CheckClient(v int) error {
	if v < MinClientVersion {
		return fmt.Errorf("capo-ipam speaks wire v%d and this capo-agent answers v%d or later: the DEL is journaled; upgrade capo-ipam (the agent copies its own at start)", v, MinClientVersion)
	}
	return nil
}

// checkAgent says why capo-ipam will not take an agent's answer, or nil.
func checkAgent(v int) error {
	if v < MinAgentVersion {
		return fmt.Errorf("capo-agent speaks wire v%d and this capo-ipam needs v%d or later", v, MinAgentVersion)
	}
	return nil
}
