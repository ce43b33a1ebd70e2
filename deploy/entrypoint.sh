#!/bin/sh
# The mneme image's entry point: the first argument chooses what the container runs.
#
#   nats                               nats-server with /etc/mneme/$MNEME_NATS_CONFIG (for
#                                      nats-users.conf and the hub's nats-hub*.conf, mneme's
#                                      identities made in /keys first)
#   ingest|retrieval|compressor|pattern  that service, holding its store lock (below)
#   api                                the HTTP api and dashboard (token: `mneme token`)
#   healthcheck <name>                 exit 0 when <name> (nats, api or a service) is healthy
#   anything else                      run as given (`mneme status`, `mneme-hook …`, `sh`)
#
# Every service replaces this shell (exec), so it is process 1 and receives SIGTERM itself.
set -eu

# Each service that writes the store keeps an exclusive lock beside the database for as long as
# it runs (the service takes it itself, `store::Store::hold_writer`). A second box started on
# the same volume (another compose project, a `docker run`) finds the lock taken and refuses to
# start, instead of a second writer consuming a different NATS stream into the same tables. The
# kernel drops the lock when the process dies, so a crash or `docker kill` never leaves a stale
# one behind. Here it is only tried and let go at once, so a second box stops before it loads
# anything, with this message and exit 75; holding it across exec would make the service find
# its own lock taken.
check_store_lock() {
    db="${MNEME_DB:-${MNEME_HOME:-/data}/mneme.db}"
    lock="$db.$1.lock"
    mkdir -p "$(dirname "$lock")"
    if ! flock --nonblock "$lock" true; then
        echo "mneme-$1: refusing to start: another mneme-$1 holds $lock, so a second box is using this store" >&2
        exit 75
    fi
}

# Print the authorization block admitting mneme's identities in the keys directory $1 (made
# there when missing) and, when $2 names a file, the team members it lists.
make_authorization() {
    if [ -n "$2" ]; then
        mneme nats-key --users "$1" --members "$2"
    else
        mneme nats-key --users "$1"
    fi
}

# A health check over plain HTTP with bash's /dev/tcp: the image has no curl or wget, and needs none.
http_ok() {
    bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" "$2" >&3 && head -n 1 <&3 | grep -q " 200 "' _ "$1" "$2"
}

# compose mounts the file named by MNEME_NATS_NKEY_FILE at this path (the `nats-nkey` secret),
# and an empty file when none is named. A non-empty file there is the NKey seed the
# box's clients authenticate with, unless MNEME_NATS_NKEY names another one explicitly. The
# health check runs in a process of its own, not under the exec below, so it calls this too.
# With an argument, a seed the image's user cannot read stops the container with the remedy
# instead of leaving it to be refused by NATS over and over; a bind mount keeps the host file's
# owner and mode, and nothing running as this user can change them.
mounted_nkey=/run/secrets/nats-nkey
use_mounted_nkey() {
    if [ -n "${MNEME_NATS_NKEY:-}" ] || [ ! -s "$mounted_nkey" ]; then
        return 0
    fi
    if [ -r "$mounted_nkey" ]; then
        export MNEME_NATS_NKEY="$mounted_nkey"
    elif [ -n "${1:-}" ]; then
        echo "mneme-$1: refusing to start: the NKey seed $mounted_nkey (MNEME_NATS_NKEY_FILE) is not readable by uid $(id -u); on the host, give it to that user: chown $(id -u) <file> (or setfacl -m u:$(id -u):r <file>)" >&2
        exit 78
    fi
}

command="${1:-help}"
case "$command" in
nats)
    shift
    config="${MNEME_NATS_CONFIG:-nats.conf}"
    # nats-server stops on an unset token by itself, but an empty one would let anybody in.
    token="${MNEME_NATS_TOKEN:-}"
    if [ "$config" = nats-auth.conf ] && [ "${#token}" -lt 16 ]; then
        echo "nats: refusing to start: $config needs MNEME_NATS_TOKEN of 16 characters or more" >&2
        exit 78
    fi
    # Likewise for an NKey user: anything but a user's public key (U and 55 more characters),
    # a seed pasted by mistake above all, is refused here with a plain reason.
    user="${MNEME_NATS_NKEY_USER:-}"
    if [ "$config" = nats-nkey.conf ]; then
        case "$user" in
        U*) [ "${#user}" -eq 56 ] ;;
        *) false ;;
        esac || {
            echo "nats: refusing to start: $config needs MNEME_NATS_NKEY_USER, a user's public key (U and 55 more characters, printed by mneme nats-key)" >&2
            exit 78
        }
    fi
    case "$config" in
    nats-users.conf | nats-hub.conf | nats-hub-cluster.conf)
        # mneme's identities: the seeds are made once in the keys volume (existing ones kept),
        # and the server runs from there with their public keys and permissions beside it. A
        # team hub (docs/team.md) admits its members too, whose public keys its owner lists in
        # team-members in the same volume; a malformed line stops the server with the file and
        # line, rather than starting without the member.
        keys="${MNEME_NATS_KEYS:-/keys}"
        members=
        case "$config" in
        nats-hub*)
            if [ -z "${MNEME_NATS_NAME:-}" ]; then
                echo "nats: refusing to start: $config needs MNEME_NATS_NAME, this server's name (unique among a hub's nodes)" >&2
                exit 78
            fi
            if [ -e "$keys/team-members" ]; then
                members="$keys/team-members"
            fi
            ;;
        esac
        # The nodes of a clustered hub share the keys volume and may start together, so every
        # file is written beside its place under a name of its own and renamed into it: a node
        # never reads a file another node is halfway through writing.
        new="$(mktemp "$keys/authorization.conf.XXXXXX" 2>/dev/null)" || {
            echo "nats: refusing to start: cannot write to $keys (is the nats-keys volume mounted and writable by uid $(id -u)?)" >&2
            exit 78
        }
        if ! error="$(make_authorization "$keys" "$members" 2>&1 >"$new")"; then
            rm -f "$new"
            echo "nats: refusing to start: cannot make mneme's NATS identities in $keys: ${error#error: }" >&2
            exit 78
        fi
        mv "$new" "$keys/authorization.conf"
        case "$config" in
        nats-users.conf) needed="nats.conf nats-users.conf" ;;
        nats-hub.conf) needed="nats.conf nats-hub.conf" ;;
        *) needed="nats.conf nats-hub.conf nats-hub-cluster.conf" ;;
        esac
        for file in $needed; do
            copy="$(mktemp "$keys/$file.XXXXXX")"
            cat "/etc/mneme/$file" >"$copy"
            mv "$copy" "$keys/$file"
        done
        exec nats-server --config "$keys/$config" "$@"
        ;;
    esac
    exec nats-server --config "/etc/mneme/$config" "$@"
    ;;
ingest | retrieval | compressor | pattern)
    shift
    use_mounted_nkey "$command"
    check_store_lock "$command"
    exec mneme serve "$command" "$@"
    ;;
api)
    shift
    use_mounted_nkey api
    exec mneme serve api "$@"
    ;;
healthcheck)
    [ "${2:-}" = nats ] || use_mounted_nkey "${2:-healthcheck}"
    case "${2:-}" in
    # JetStream must be up too, not only the client port: the services create streams at start.
    nats) http_ok 8222 "/healthz?js-enabled-only=true" ;;
    api) addr="${MNEME_API_ADDR:-127.0.0.1:7437}" && http_ok "${addr##*:}" /healthz ;;
    *) exec mneme status --check "${2:-}" >/dev/null ;;
    esac
    ;;
help | --help | -h)
    sed -n '2,9s/^# \{0,1\}//p' "$0"
    ;;
*)
    use_mounted_nkey
    exec "$@"
    ;;
esac
