# oai-bridge gateway image: built in one stage, run as a non-root user from a small one.
#
#   docker build -t oai-bridge .
#   docker run -p 8080:8080 -v oai-bridge-state:/var/lib/oai-bridge \
#     -v $PWD/bridge.toml:/etc/oai-bridge/bridge.toml:ro \
#     -e OAI_BRIDGE_PUBLIC_URL=https://repository.example.edu/sitemaps/ oai-bridge

FROM rust:1.95-slim-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# The build's settings (AWS-LC seeded without CPU jitter), as every build from the repository.
COPY .cargo ./.cargo
COPY crates ./crates
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked --bin oai-bridge && strip target/release/oai-bridge

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/oai-bridge --shell /usr/sbin/nologin oai-bridge \
    && mkdir -p /var/lib/oai-bridge /etc/oai-bridge && chown oai-bridge /var/lib/oai-bridge
COPY --from=build /src/target/release/oai-bridge /usr/local/bin/oai-bridge
# The shipped bridge.toml serves the bundled sample, a path relative to the file's folder: the
# image as built serves it (tests/it/packaging.rs checks every such path is copied here).
COPY bridge.toml /etc/oai-bridge/bridge.toml
COPY fixtures/sample-repository.xml /etc/oai-bridge/fixtures/sample-repository.xml
# The licence travels with the binary, where Debian keeps a package's.
COPY LICENSE /usr/share/doc/oai-bridge/LICENSE
USER oai-bridge
# The admin listener (status page, /metrics, reload) listens on every interface of the
# container, so that a scraper can reach it; it is not EXPOSEd: publish it only privately
# (-p 127.0.0.1:8081:8081, or a private network), never beside the public port.
ENV OAI_BRIDGE_LISTEN=0.0.0.0:8080 \
    OAI_BRIDGE_ADMIN_LISTEN=0.0.0.0:8081 \
    OAI_BRIDGE_STATE_DIR=/var/lib/oai-bridge \
    OAI_BRIDGE_LOG_FORMAT=json
VOLUME /var/lib/oai-bridge
EXPOSE 8080
# Orchestrators probe GET /healthz (alive) and /readyz (every repository has a generation).
# Docker's own health check asks /healthz with the binary itself (the hidden `probe` command):
# the slim image has no curl, and installing it would add an HTTP client and its libraries to
# the image for this alone. The port is OAI_BRIDGE_LISTEN's.
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/oai-bridge", "probe", "--timeout", "5", "http://127.0.0.1:8080/healthz"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/oai-bridge"]
CMD ["serve", "--config", "/etc/oai-bridge/bridge.toml"]
