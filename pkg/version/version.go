// Package version carries the build's version, set at link time with
// -ldflags "-X github.com/capo-net/capo/pkg/version.Version=...".
package version

// Version is "dev" in builds that did not go through the Makefile.
var Version = "dev"
