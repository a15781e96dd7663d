# Hindsight's daemon in a container: both binaries, built static
# (CGO_ENABLED=0), on an empty base. docker-compose.yml runs it beside a
# Weaviate node; cli/docker_test.go checks that this file and the
# compose file agree with the code (Go version, build command, ports,
# environment names).
#
#   docker build --build-arg VERSION=$(git describe --always) -t hindsight .

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/hindsight-proxy/hindsight/cli.version=${VERSION}" -o /out/ ./cmd/hindsight ./cmd/hindsightd \
 && mkdir -p /out/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/hindsight /out/hindsightd /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV HINDSIGHT_HOME=/data
VOLUME /data
# Metrics over TCP: off loopback inside the container, so allowed
# explicitly; publish the port on the host's loopback only.
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/hindsightd"]
CMD ["daemon", "--metrics-listen", "0.0.0.0:9464", "--metrics-allow-remote"]
