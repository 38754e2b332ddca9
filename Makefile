# capo: see README.md. `make test` is what CI runs (as root).
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/capo-net/capo/pkg/version.Version=$(VERSION)
# Calico's pinned pseudo-versions are unknown to the checksum database; go.sum pins them.
export GONOSUMDB := github.com/projectcalico,k8s.io
export CGO_ENABLED := 0

BINARIES := capo-ipam capo-agent capo-controller capo-install capoctl
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/)
E2E_TIMEOUT ?= 60m
BENCH_COUNT ?= 200x

IMAGE ?= ghcr.io/capo-net/capo:$(VERSION)

.PHONY: all build image demo demo-node test lint unit e2e bench testbins manifests clean $(addprefix bin/,$(BINARIES))
all: build

build: $(addprefix bin/,$(BINARIES))

bin/capo-ipam:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/capo-ipam

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
	$(GO) run ./build/cmd/capo-image -image $(IMAGE) -version $(VERSION) -o bin/capo-image.tar

## demo: capo's main job on the real chain, told step by step (root).
demo:
	@echo "capo demo. The first run builds etcd, kube-apiserver and calico from the Go module proxy:"
	@echo "about 7 minutes on 2 cores. Later runs start in seconds."
	@$(GO) test -count=1 -run TestDemo -v ./test/demo/ 2>&1 | grep -vE '^(=== RUN|--- PASS|PASS$$|ok |coverage)'; exit $${PIPESTATUS[0]}

## demo-node: the same story on a real node: a kubelet, containerd, Calico's
## CNI and capo from its image, installed by its chart (root). The first run
## also builds the kubelet and the rest of a node: several more minutes.
demo-node:
	@echo "capo demo on a real node. The first run builds the Kubernetes node components from the Go module proxy."
	@CAPO_DEMO_NODE=1 $(GO) test -count=1 -timeout 20m -run TestDemoNode -v ./test/node/ 2>&1 | grep -vE '^(=== RUN|--- PASS|PASS$$|ok |coverage|[0-9]{4}/[0-9]{2}/[0-9]{2} )|_test.go:[0-9]+: kubelet restarted'; exit $${PIPESTATUS[0]}

## test: everything CI gates on: lint, unit tests with -race, end-to-end (root).
test: lint unit e2e

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	cd test/tools && $(GO) mod tidy -diff

unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 $(UNIT_PKGS)

## e2e: the real Calico chain on both datastores; builds etcd, kube-apiserver
## and calico once into ~/.cache/capo-testbed (several minutes the first time).
## One test binary at a time (-p 1): each runs its own etcd and API server,
## and two cores do not carry three of each without stalls.
e2e:
	$(GO) test -p 1 -count=1 -timeout $(E2E_TIMEOUT) -v ./test/... 2>&1 | tee e2e.log | grep -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok|panic)|_test.go:|testbed:'; exit $${PIPESTATUS[0]}

## bench: calico-ipam alone vs through capo, side by side in one run; the
## release planner and the controller at 10 000 reservations.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/release/ | grep -E '^(Benchmark|ok|FAIL)'
	$(GO) test -run '^$$' -bench . -benchtime $(BENCH_COUNT) -timeout 60m ./test/e2e/ | grep -E '^(Benchmark|ok|FAIL|PASS)'

## manifests: render the Helm chart's defaults into deploy/manifests/capo.yaml.
manifests:
	$(GO) test ./deploy/ -run TestManifestsInSync -update

## testbins: build the pinned test servers and calico ahead of time.
testbins:
	$(GO) test -count=1 -timeout 30m -run TestBedStarts -v ./test/testbed/

clean:
	rm -rf bin e2e.log
