//go:build tools

// Package lint pins golangci-lint for `make lint`. It is a module of its own
// so that the linter's dependencies never move those of test/tools, whose
// go.sum keys the test bed's cached etcd and kube-apiserver.
package lint

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
