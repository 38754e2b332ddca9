# Builds capo's binaries from Go modules only; the run stage holds no shell.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN GONOSUMDB=github.com/projectcalico,k8s.io go mod download
COPY . .
ARG VERSION=dev
RUN make build VERSION=${VERSION}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/ /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/capo-ipam"]
