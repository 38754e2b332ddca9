# capo: see README.md. `make test` is what CI runs (as root).
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/capo-net/capo/pkg/version.Version=$(VERSION)
# Calico's pinned pseudo-versions are unknown to the checksum database; go.sum pins them.
export GONOSUMDB := github.com/projectcalico,k8s.io
export CGO_ENABLED := 0
# go.mod's toolchain line (a patched Go) builds and tests everything, also
# where the installed Go's go.env says GOTOOLCHAIN=local: the go command
# fetches it once from the module proxy.
export GOTOOLCHAIN := auto
# Every build and test compiles with -trimpath, as the binaries and the test
# bed's servers are built: one compile of the dependencies serves them all
# (without it, the test binaries and go vet compiled the whole graph again).
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

BINARIES := capo-ipam capo-ipam-kube capo-agent capo-controller capo-install capoctl
# Every module: each must be tidy. The nested ones only pin tools.
MODULES := . test/tools test/tools/calico-v3.30 test/tools/lint test/tools/vuln

# Tools built from the modules pinned under test/tools, cached beside the test
# bed's servers and keyed like them by the pinning module's go.mod and go.sum:
# a version bump builds anew, otherwise nothing is rebuilt.
TOOLS_CACHE := $(or $(CAPO_TESTBED_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/capo-testbed)
tool_key = $(shell cat test/tools/$(1)/go.mod test/tools/$(1)/go.sum | sha256sum | cut -c1-12)
GOLANGCI_LINT := $(TOOLS_CACHE)/golangci-lint-$(call tool_key,lint)/golangci-lint
# promtool comes from Debian's prometheus package (test/tools/promtool/fetch.sh).
PROMTOOL := $(TOOLS_CACHE)/promtool-deb/promtool
VULN_DIR := $(TOOLS_CACHE)/vuln-$(call tool_key,vuln)
GOVULNCHECK := $(VULN_DIR)/govulncheck

# golangci-lint's findings fail `make lint`; LINT_STRICT=0 prints them
# without failing (its errors, such as a bad config, fail either way).
LINT_STRICT ?= 1
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/)
# Packages with fuzz targets; test/ holds none, and its modules are tools.
FUZZ_PKGS = $(shell grep -rl --include='*_test.go' --exclude-dir=test '^func Fuzz' . | xargs -n1 dirname | sort -u)
FUZZTIME ?= 30s
FUZZTIME_SHORT ?= 3s
FUZZMINIMIZETIME ?= 5s
E2E_TIMEOUT ?= 60m
BENCH_COUNT ?= 200x

IMAGE ?= ghcr.io/capo-net/capo:$(VERSION)

.PHONY: all build image demo demo-node test test-node calico-suite lint vuln unit unit-deps fuzz fuzz-short e2e e2e-core e2e-node prebuild bench bench-node soak testbins tools golangci-lint promtool manifests clean $(addprefix bin/,$(BINARIES))
all: build

## build: the six binaries in one go build, which compiles what they share
## once and keeps both cores busy; bin/<name> builds one.
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ $(addprefix ./cmd/,$(BINARIES))

bin/capo-ipam:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/capo-ipam

bin/capo-ipam-kube:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/capo-ipam-kube

bin/capo-agent:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/capo-agent

bin/capo-controller:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/capo-controller

bin/capo-install:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/capo-install

# capoctl, also as a kubectl plugin: `kubectl capo` runs kubectl-capo.
bin/capoctl:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/capoctl
	cp $@ bin/kubectl-capo

## image: capo's image for linux/amd64 and linux/arm64, built without a
## container engine, as one archive for docker load, ctr images import,
## kind load image-archive and crane push (see build/image).
image:
	$(GO) run ./build/cmd/capo-image -image $(IMAGE) -version $(VERSION) -revision $$(git rev-parse HEAD 2>/dev/null) -o bin/capo-image.tar

## release: VERSION=vX.Y.Z: the image archive, the chart, the manifests,
## capoctl and kubectl-capo for linux and darwin, the krew manifest, an SPDX
## SBOM and SHA256SUMS, all in dist/ (docs/releasing.md). Only from a clean
## tree whose HEAD is tagged VERSION; ALLOW_UNTAGGED=1 makes a test build.
ALLOW_UNTAGGED ?= 0
.PHONY: release
release:
	$(GO) run ./build/cmd/capo-release -version $(VERSION) -o dist $(if $(filter 1,$(ALLOW_UNTAGGED)),-allow-untagged)

## demo: capo's main job on the real chain, told step by step (root).
## The servers are built first, as a step of their own with a generous
## timeout (DEMO_BUILD_TIMEOUT), so the demo's own timer (DEMO_TIMEOUT) starts
## with them in the cache: a slow first build is never cut short mid-story.
DEMO_BUILD_TIMEOUT ?= 60m
DEMO_TIMEOUT ?= 15m
demo:
	@echo "capo demo. Step 1: building etcd, kube-apiserver and calico from the Go module proxy, once"
	@echo "(about 7 minutes on 2 cores, up to $(DEMO_BUILD_TIMEOUT); cached in $(TOOLS_CACHE), so later runs skip it)."
	@timeout $(DEMO_BUILD_TIMEOUT) $(GO) run ./test/prebuild servers 2>/dev/null || { echo "building the servers failed; run: $(GO) run ./test/prebuild servers"; exit 1; }
	@echo "Step 2: the demo (the servers are built; it has $(DEMO_TIMEOUT))."
	@$(GO) test -count=1 -timeout $(DEMO_TIMEOUT) -run TestDemo -v ./test/demo/ 2>&1 | grep -vE '^(=== RUN|--- PASS|PASS$$|ok |coverage)'; exit $${PIPESTATUS[0]}

## demo-node: the same story on a real node: a kubelet, containerd, Calico's
## CNI and capo from its image, installed by its chart (root); then a second
## node joins, and a client there keeps talking to a redis StatefulSet member
## through its eviction and its return with the same address. The first run
## also builds the kubelet and the rest of a node: several more minutes.
demo-node:
	@echo "capo demo on a real node. The first run builds the Kubernetes node components from the Go module proxy."
	@CAPO_DEMO_NODE=1 $(GO) test -count=1 -timeout 20m -run TestDemoNode -v ./test/node/ 2>&1 | grep -vE '^(=== RUN|--- PASS|PASS$$|ok |coverage|[0-9]{4}/[0-9]{2}/[0-9]{2} )|_test.go:[0-9]+: kubelet restarted'; exit $${PIPESTATUS[0]}

## test: everything CI gates on: lint, vuln, unit tests with -race, and
## every end-to-end package (root), in three lanes side by side: the real
## node; the other end-to-end packages as jobs of CAPO_TEST_WORKERS
## workers (test/e2e cut into CAPO_E2E_SHARDS shards, each with a bed of
## its own); the checks at low priority (test/stages.sh says why). At its
## end, each stage's start and time; every stage's output in test-logs/.
test:
	@MAKE='$(MAKE)' test/stages.sh

## lint: gofmt, go vet, go mod tidy -diff in every module, and golangci-lint
## (.golangci.yml) over the main module, test packages included.
lint: $(GOLANGCI_LINT)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@for m in $(MODULES); do echo "go mod tidy -diff ($$m)"; (cd $$m && $(GO) mod tidy -diff) || exit 1; done
	$(GOLANGCI_LINT) run $(if $(filter 1,$(LINT_STRICT)),,--issues-exit-code=0) ./...

## vuln: govulncheck over the binaries (./cmd/...) against the Go
## vulnerability database of the golang.org/x/vulndb module pinned in
## test/tools/vuln, indexed offline (no network beyond the module proxy);
## the patched toolchain of go.mod's toolchain line (GOTOOLCHAIN=auto). It
## fails on a reachable advisory that is neither fixed nor recorded, with
## why, in SECURITY.md.
vuln: $(GOVULNCHECK)
	@set -o pipefail; GOTOOLCHAIN=auto $(GOVULNCHECK) -db file://$(VULN_DIR)/db -json ./cmd/... | $(VULN_DIR)/gate -recorded SECURITY.md

## unit: the unit tests with -race; promtool is built first for the chart's
## alert tests (deploy/alerts_test.go).
## UNIT_EXEC runs each test binary through a program (go test -exec):
## `make test` gives 'nice -n -15', compiling at low priority and running
## the tests at normal priority.
UNIT_EXEC ?=
unit: $(PROMTOOL)
	CGO_ENABLED=1 CAPO_PROMTOOL=$(PROMTOOL) $(GO) test -race -count=1 $(if $(UNIT_EXEC),-exec '$(UNIT_EXEC)') $(UNIT_PKGS)

## unit-deps: the unit tests' packages and everything they import compiled
## for -race into Go's cache, without linking or running a test: make
## test's build phase, so that the unit stage compiles little beside the
## end-to-end suites.
unit-deps:
	CGO_ENABLED=1 $(GO) build -race $(UNIT_PKGS)

## fuzz: every fuzz target of the main module (func Fuzz* in a _test.go),
## FUZZTIME each, one after another: a run fuzzes one target. The seeds
## (f.Add, and testdata/fuzz/<FuzzName>/) run under `make unit` too; what
## fuzzing adds stays in Go's cache, as `go test -fuzz` keeps it, and a
## failing input is written to testdata/fuzz/<FuzzName>/ to commit as a
## regression seed. Each package's instrumented test binary is built once
## (bin/fuzz/); minimising each new input is capped, so the time goes to
## fuzzing. Go 1.26 may fail a run with a bare "context deadline exceeded"
## as the time ends, no input written: that alone is not a finding.
fuzz:
	@set -eo pipefail; mkdir -p $(CURDIR)/bin/fuzz; for p in $(FUZZ_PKGS); do \
	  bin=$(CURDIR)/bin/fuzz/$$(echo $${p#./} | tr / -).test; \
	  $(GO) test -c -fuzz . -o $$bin $$p; \
	  cache=$$($(GO) env GOCACHE)/fuzz/$$($(GO) list $$p); \
	  for f in $$(cd $$p && $$bin -test.list '^Fuzz'); do \
	    echo "fuzz $$p $$f for $(FUZZTIME)"; \
	    out=$$(cd $$p && $$bin -test.run '^$$' -test.fuzz "^$$f\$$" -test.fuzztime $(FUZZTIME) \
	      -test.fuzzminimizetime $(FUZZMINIMIZETIME) -test.fuzzcachedir $$cache 2>&1) && rc=0 || rc=$$?; \
	    grep -v '^fuzz: elapsed: ' <<<"$$out" || true; \
	    [ $$rc = 0 ] && continue; \
	    grep -q 'Failing input written' <<<"$$out" || ! grep -qx '    context deadline exceeded' <<<"$$out" && exit 1; \
	    echo "(no input failed: Go's fuzzing stopped racing its own deadline, go.dev/issue/75804, fixed in Go 1.27)"; \
	  done; \
	done

## fuzz-short: a brief pass over every fuzz target: about a minute, and on
## a cold cache ten more to build the instrumented test binaries. Not in
## `make test`: the seeds and the regressions found run under `make unit`.
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

## e2e: the real Calico chain on both datastores, and capo as it ships on a
## real node (test/node: a kubelet, containerd, the chart); builds etcd,
## kube-apiserver, calico and the node's components once into
## ~/.cache/capo-testbed (several minutes the first time).
## One test binary at a time (-p 1): each runs its own etcd and API server.
## `make test` runs its two parts, e2e-core and e2e-node (the real node and
## Calico's own CNI suite), each after the programs it needs are built.
E2E_NODE_PKGS := ./test/nodebed/ ./test/node/ ./test/calicosuite/
E2E_CORE_PKGS = $(shell $(GO) list ./test/... | grep -v -e '/test/node$$' -e '/test/nodebed$$' -e '/test/calicosuite$$' -e '/test/prebuild$$' -e '/test/tools')
E2E_FILTER := '^(=== RUN|--- |\s+--- |PASS|FAIL|ok|panic)|_test.go:|testbed:|nodebed:|calicosuite:'
e2e:
	$(GO) test -p 1 -count=1 -timeout $(E2E_TIMEOUT) -v ./test/... 2>&1 | tee e2e.log | grep -E $(E2E_FILTER); exit $${PIPESTATUS[0]}

e2e-core:
	$(GO) test -p 1 -count=1 -timeout $(E2E_TIMEOUT) -v $(E2E_CORE_PKGS)

e2e-node:
	$(GO) test -p 1 -count=1 -timeout $(E2E_TIMEOUT) -v $(E2E_NODE_PKGS)

## calico-suite: Calico's own CNI test suite (cni-plugin/tests of the pinned
## Calico module) with plain calico-ipam and with capo-ipam in front, on
## both datastores, in namespaces of its own (root; test/calicosuite,
## docs/calico-suite.md); fails when a spec passes plain and not with capo,
## but the documented limits. make test (e2e-node) and make e2e run it too.
calico-suite:
	@set -o pipefail; $(GO) test -count=1 -timeout 60m -v -run TestCalicoSuite ./test/calicosuite/ 2>&1 | tee calico-suite.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go:|testbed:|calicosuite:'

## test-node: the whole real-node suite (test/node, root), as make e2e runs
## it (a node that really dies and a node's reboot included), then the
## traffic tests again in the bed's second dataplane configuration
## (unencapsulated pools, felix programming the routes between nodes).
test-node:
	@set -o pipefail; $(GO) test -count=1 -timeout 40m -v ./test/node/ 2>&1 | tee test-node.log | grep -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok|panic)|_test.go:|nodebed:'
	@set -o pipefail; CAPO_NODE_DATAPLANE=unencapsulated $(GO) test -count=1 -timeout 20m -v -run 'TestTraffic|TestAnyNode|TestStrictAffinity' ./test/node/ 2>&1 | tee -a test-node.log | grep -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok|panic)|_test.go:|nodebed:'

## bench: calico-ipam alone vs through capo, side by side in one run; the
## release planner and the controller at 10 000 reservations.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/release/ | grep -E '^(Benchmark|ok|FAIL)'
	$(GO) test -run '^$$' -bench . -benchtime $(BENCH_COUNT) -timeout 60m ./test/e2e/ | grep -E '^(Benchmark|ok|FAIL|PASS)'

## bench-node: pod start on the real two-node bed (root), capo against
## plain Calico in the same run: CAPO_BENCH_PODS pods (default 100) half on
## a node opted in, half on one left to Calico, then the nodes swapped;
## median and p90 time to Running, pods Running per second, and the ratio
## (docs/realnode.md). Not part of make test.
bench-node:
	@set -o pipefail; $(GO) test -count=1 -timeout 40m -run '^$$' -bench BenchmarkPodStart -benchtime 1x -v ./test/node/ 2>&1 | tee bench-node.log | grep -E '^(Benchmark|ok|FAIL|PASS|panic)|_test.go:|nodebed:'

## soak: the robustness suite's long run (test/robust, root): random
## operations on StatefulSet and plain pods under faults, per datastore,
## until CAPO_SOAK_DURATION (default 15m) or CAPO_SOAK_EVENTS (default 5000)
## operations, whichever comes first; in native v3 mode too where
## CAPO_CALICO_BIN is given. Prints each run's seed and figures (events
## run, faults injected by kind, invariant samples taken, violations).
## Not part of make test, which runs the short variant.
SOAK_TIMEOUT ?= 120m
soak:
	@set -o pipefail; CAPO_SOAK=1 $(GO) test -p 1 -count=1 -timeout $(SOAK_TIMEOUT) -v -run '^TestSoak$$' ./test/robust/... 2>&1 | tee soak.log | grep -vE '^=== (PAUSE|CONT)'

## manifests: render the Helm chart's defaults into deploy/manifests/capo.yaml
## (Kubernetes 1.27+) and its admission policy into capo-admission-policy.yaml (1.30+).
manifests:
	$(GO) test ./deploy/ -run TestManifestsInSync -update

## prebuild (testbins): build the programs the end-to-end suites run into
## the test bed's cache ahead of time: the servers, the node's components,
## and the rest (test/prebuild).
prebuild testbins:
	$(GO) run ./test/prebuild servers node extra

## tools: build golangci-lint and promtool into the cache ahead of time.
tools: golangci-lint promtool $(GOVULNCHECK)
golangci-lint: $(GOLANGCI_LINT)
promtool: $(PROMTOOL)

# build_tool: go build in the pinning module, into a temporary name renamed
# into place, so an interrupted build never leaves a half-written tool.
define build_tool
	@mkdir -p $(@D)
	@echo "building $(@F) from test/tools/$(1) (once; cached in $(@D))"
	@start=$$SECONDS; cd test/tools/$(1) && $(GO) build -trimpath $(3) -o $@.tmp$$$$ $(2) && mv $@.tmp$$$$ $@ && echo "built $(@F) in $$((SECONDS-start))s"
endef

$(GOLANGCI_LINT):
	$(call build_tool,lint,github.com/golangci/golangci-lint/v2/cmd/golangci-lint)

# govulncheck, the gate, and the database indexed from the pinned vulndb
# module's OSV files, all keyed by test/tools/vuln's go.mod and go.sum.
$(GOVULNCHECK):
	@mkdir -p $(VULN_DIR)
	@cd test/tools/vuln && $(GO) build -trimpath -o $(VULN_DIR)/indexdb golang.org/x/vulndb/cmd/indexdb && $(GO) build -trimpath -o $(VULN_DIR)/gate ./gate
	@rm -rf $(VULN_DIR)/db.tmp && $(VULN_DIR)/indexdb -vulns "$$(cd test/tools/vuln && $(GO) list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv" -out $(VULN_DIR)/db.tmp && rm -rf $(VULN_DIR)/db && mv $(VULN_DIR)/db.tmp $(VULN_DIR)/db
	$(call build_tool,vuln,golang.org/x/vuln/cmd/govulncheck)

$(PROMTOOL):
	@echo "fetching promtool from Debian's prometheus package (once; cached in $(@D))"
	@test/tools/promtool/fetch.sh $(@D)

clean:
	rm -rf bin e2e.log test-node.log bench-node.log test-logs calico-suite.log soak.log
