# hermesd container image: the stripped `dist` binary on debian:bookworm-slim with only TLS roots
# and tini added, running as an unprivileged user with its state in a volume.
#
#   docker build -t hermesd .
#   docker run -d --name hermesd -p 127.0.0.1:8642:8642 \
#     -v hermesd-data:/var/lib/hermesd \
#     -v "$PWD/hermesd.toml:/var/lib/hermesd/config.toml:ro" \
#     -e API_SERVER_KEY=... hermesd
#
# Networking: inside a container hermesd must listen on 0.0.0.0 to be reachable
# through a published port, so the config needs
#
#   [http]
#   listen = "0.0.0.0:8642"
#
# and hermesd refuses to serve its API on a non-loopback address unless API_SERVER_KEY
# is set (`hermesd check` and `hermesd run` exit 78 otherwise). With the default
# 127.0.0.1:8642 the healthcheck passes but nothing outside the container can connect.
#
# Secrets come from the environment (-e / env_file), NAME_FILE variables pointing at
# mounted files (e.g. Docker secrets), or $HERMESD_HOME/.env — never from the image.

# ---- build ---------------------------------------------------------------------------
FROM rust:1-bookworm AS build
WORKDIR /src
# The whole workspace: both crates, Cargo.lock, migrations, benches and tests (the
# manifest names them). .dockerignore keeps target/, .git/ and databases out.
COPY . .
# The `dist` profile: fat LTO, one codegen unit, symbols stripped, for the shipped binary.
RUN cargo build --profile dist --locked --bin hermesd

# ---- runtime -------------------------------------------------------------------------
FROM debian:bookworm-slim
# ca-certificates: TLS roots for model and chat APIs. tini: PID 1, which reaps orphaned processes
# (a tool's command whose parent exited) and forwards signals. Nothing else: the health check is
# hermesd's own (`hermesd health`), so the image carries no HTTP client.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates tini \
    && rm -rf /var/lib/apt/lists/*
# A fixed, high uid/gid so files in the volume keep a stable owner that matches no
# host account.
RUN groupadd --system --gid 10001 hermesd \
    && useradd --system --uid 10001 --gid hermesd --no-create-home \
        --home-dir /var/lib/hermesd --shell /usr/sbin/nologin hermesd \
    && install -d -m 0700 -o hermesd -g hermesd /var/lib/hermesd
COPY --from=build /src/target/dist/hermesd /usr/local/bin/hermesd

# State (SQLite database, optional .env) and the default config path
# $HERMESD_HOME/config.toml.
ENV HERMESD_HOME=/var/lib/hermesd
# Declared after the chown above so a fresh named volume is owned by hermesd.
VOLUME /var/lib/hermesd
EXPOSE 8642

# /healthz answers while the process serves HTTP (use /readyz for readiness); `hermesd health`
# asks it on the configured listen address (a wildcard one on loopback) and exits 0 or 1.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
    CMD ["/usr/local/bin/hermesd", "health"]

USER hermesd
WORKDIR /var/lib/hermesd
# SIGTERM (docker stop) drains running turns for up to [agent] drain_timeout (20s by
# default) plus deliveries up to 5s: stop with a grace period of ~30s, e.g.
# `docker stop -t 30` or compose `stop_grace_period: 30s`.
ENTRYPOINT ["/usr/bin/tini", "--", "hermesd"]
CMD ["run"]
