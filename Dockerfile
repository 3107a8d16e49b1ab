# syntax=docker/dockerfile:1
#
# Images of the Tuna Kubernetes operator, all from one build stage:
#
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) \
#     -t code.tuna.am/tuna/tuna-k8s-operator .                                  # default: the operator (the chart's image)
#   docker build --target tuna-edge -t code.tuna.am/tuna/tuna-edge .            # the self-hosted edge
#   docker build --target tuna-operator -t code.tuna.am/tuna/tuna-operator .    # the companion CLI
#
# The binaries are static (CGO_ENABLED=0) and run as user 65532 ("nonroot")
# on a read-only root filesystem: they write nothing outside the edge's
# --data-dir (a volume). Without Docker, the same images come from
#   go run ./hack/images/cmd/tuna-images save -o images.tar
# which the node suite imports into containerd and runs under the chart.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# Version stamps every binary reports (`version`, `--version`, the start-up
# log line): the release, its commit and the commit's date (not the build's,
# so that a rebuild of a release gives the same binary). See internal/version.
ARG VERSION=dev
ARG COMMIT=
ARG DATE=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    pkg=code.tuna.am/tuna/k8s-operator/internal/version && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w -X $pkg.Version=${VERSION} -X $pkg.Commit=${COMMIT} -X $pkg.Date=${DATE}" -o /out/ \
      ./operator/cmd/tuna-k8s-operator ./edge/cmd/tuna-edge ./cli/cmd/tuna-operator

# The images, FROM scratch: the static binary, and hack/images/rootfs (an
# /etc/passwd and /etc/group naming user 65532 "nonroot"). The binaries
# carry their own CA roots. hack/images is the one definition of these
# images: the release workflow builds and pushes them with it, without
# Docker, and its test fails while this file disagrees with it.

# The edge. Mount a volume at /var/lib/tuna-edge, owned by 65532, for its state.
FROM scratch AS tuna-edge
COPY hack/images/rootfs/ /
COPY --from=build /out/tuna-edge /usr/local/bin/tuna-edge
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/tuna-edge"]
CMD ["serve"]

# The companion CLI (it embeds the chart).
FROM scratch AS tuna-operator
COPY hack/images/rootfs/ /
COPY --from=build /out/tuna-operator /usr/local/bin/tuna-operator
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/tuna-operator"]

# The operator, last so that it is the default target: the chart runs it as
# `controller` and `agent`.
FROM scratch AS tuna-k8s-operator
COPY hack/images/rootfs/ /
COPY --from=build /out/tuna-k8s-operator /usr/local/bin/tuna-k8s-operator
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/tuna-k8s-operator"]
