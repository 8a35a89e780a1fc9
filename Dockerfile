# syntax=docker/dockerfile:1
# Parley server image: built with the official Swift image, run on debian:bookworm-slim.
#   docker build -t parley:local .
#   docker run --rm -p 8080:8080 -e DATABASE_URL=postgres://... parley:local
# The runtime image has no PostgreSQL server, so DATABASE_URL must point at one
# (docker-compose.yml provides it). See docs/deployment.md.

ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${SWIFT_IMAGE} AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        pkg-config libpq-dev libsodium-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The Swift runtime is linked statically, so the runtime image needs only the C libraries; the
# migrations are compiled into the binary (ParleyMigrations).
RUN --mount=type=cache,target=/src/.build \
    swift build -c release --product parley --static-swift-stdlib \
    && mkdir -p /out \
    && cp "$(swift build -c release --show-bin-path)/parley" /out/parley

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libpq5 libsodium23 libssl3 ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/parley --create-home parley
WORKDIR /app
COPY --from=build /out/ /app/
USER parley
ENV PARLEY_HOST=0.0.0.0 \
    PARLEY_PORT=8080 \
    PARLEY_DATA_DIR=/var/lib/parley
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${PARLEY_PORT}/health" >/dev/null || exit 1
ENTRYPOINT ["/app/parley"]
CMD ["serve"]
