//go:build tools

// Package vuln pins govulncheck and the Go vulnerability database for
// `make vuln`: the database is the golang.org/x/vulndb module the module
// proxy serves (its data/osv), indexed offline by its own indexdb. A
// module of its own, so that these never move the test bed's or the
// linter's dependencies.
package vuln

import (
	_ "golang.org/x/vuln/cmd/govulncheck"
	_ "golang.org/x/vulndb/cmd/indexdb"
)
