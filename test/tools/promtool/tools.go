//go:build tools

// Package promtool pins Prometheus' promtool, which runs the unit tests of
// the chart's alerting rules (deploy/alerts_test.go). A module of its own:
// Prometheus' dependencies touch neither capo's nor test/tools'.
package promtool

import _ "github.com/prometheus/prometheus/cmd/promtool"
