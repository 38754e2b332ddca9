package reserve

// Limits bound one object of a store. On the Kubernetes datastore
// libcalico-go stores annotations again inside its own metadata
// annotation, and the API server caps annotations at 256 KiB per object:
// stay well under.
type Limits struct {
	MaxIPs             int
	MaxAnnotationBytes int
}

// DefaultLimits keeps the worst case under the cap: 160 KiB of text packs to
// at most about 214 KiB even if it did not compress at all.
var DefaultLimits = Limits{MaxIPs: 1000, MaxAnnotationBytes: 160 << 10}
