# The wasmstream image: one static binary (CGO off), no shell, no package
# manager, run as an unprivileged user. Build: make docker (IMAGE=name:tag).
#
#   docker run --rm -v $PWD:/config -p 9644:9644 wasmstream:dev run -c /config/pipeline.yaml
#
# The admin endpoint listens on every interface of the container (0.0.0.0:9644:
# /healthz, /readyz, /metrics), for probes and scrapes.
# State (state.dir) and the compiled-module cache live under
# /var/lib/wasmstream, owned by the image's user (uid 65532); mount a volume
# there to keep local state across container restarts (a new container
# otherwise restores its stores from the changelogs).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
        -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
        -o /out/usr/local/bin/wasmstream ./cmd/wasmstream && \
    mkdir -p /out/etc/ssl/certs /out/var/lib/wasmstream/state /out/var/lib/wasmstream/cache /out/tmp && \
    cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ && \
    echo 'wasmstream:x:65532:65532:wasmstream:/var/lib/wasmstream:/sbin/nologin' >/out/etc/passwd && \
    echo 'wasmstream:x:65532:' >/out/etc/group && \
    chown -R 65532:65532 /out/var/lib/wasmstream && chmod 1777 /out/tmp

FROM scratch
COPY --from=build /out/ /
USER 65532:65532
WORKDIR /var/lib/wasmstream
ENV WASMSTREAM_STATE__DIR=/var/lib/wasmstream/state \
    WASMSTREAM_RUNTIME__CACHE_DIR=/var/lib/wasmstream/cache \
    WASMSTREAM_ADMIN__LISTEN=0.0.0.0:9644
EXPOSE 9644
ENTRYPOINT ["/usr/local/bin/wasmstream"]
CMD ["run"]
