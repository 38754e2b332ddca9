# capo: one image with capo-agent, capo-controller, capo-install, capo-ipam
# and capo-ipam-kube. Built from Go modules only; the run stage has no shell.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t capo .
# GO_VERSION follows go.mod's go line (a test keeps them equal); `make image`
# builds the same image without a container engine.
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GONOSUMDB=github.com/projectcalico,k8s.io
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN make build VERSION=${VERSION}

FROM gcr.io/distroless/static-debian12:nonroot
# The labels `make image` writes (build/image.Config); REVISION: git rev-parse HEAD.
ARG VERSION=dev
ARG REVISION=""
LABEL org.opencontainers.image.title="capo" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/capo-net/capo" \
      org.opencontainers.image.url="https://github.com/capo-net/capo" \
      org.opencontainers.image.documentation="https://github.com/capo-net/capo/blob/main/docs/operations.md" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.description="capo keeps a stateful pod's old IP address reserved on Calico clusters, on every teardown path"
COPY --from=build /src/bin/capo-agent /src/bin/capo-controller /src/bin/capo-install /src/bin/capo-ipam /src/bin/capo-ipam-kube /usr/local/bin/
# Non-root by default (the controller runs so); the agent's DaemonSet runs
# it as root because it writes the node's CNI files.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/capo-controller"]
