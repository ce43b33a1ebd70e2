#!/usr/bin/env bash
# Builds the Debian base image the Dockerfile and compose.yaml name, for a machine with a Docker
# engine but no image registry: `debootstrap` installs Debian from its package archive into a
# folder, which `docker import` turns into an image tagged with the name the Dockerfile expects.
#
# Usage: bash deploy/base-images.sh [IMAGE_TAG]   (default debian:bookworm-slim)
#
# Nothing is rebuilt when the image already exists; the root filesystem tarball is kept under
# $MNEME_DOCKER_CACHE (default ~/.cache/mneme-docker) so a pruned image is re-imported in seconds.
# Needs root (debootstrap) and the `debootstrap` package.
set -euo pipefail

tag="${1:-debian:bookworm-slim}"
suite="${MNEME_DEBIAN_SUITE:-bookworm}"
mirror="${MNEME_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${MNEME_DOCKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mneme-docker}"
tarball="$cache/$suite-slim.tar"

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base-images: $tag already present"
    exit 0
fi
mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || {
        echo "base-images: debootstrap is missing (apt-get install debootstrap)" >&2
        exit 1
    }
    root="$(mktemp -d "$cache/rootfs.XXXXXX")"
    trap 'rm -rf "$root"' EXIT
    echo "base-images: debootstrap $suite into $root (a few minutes, once)"
    # minbase is Debian's smallest installable system (essential packages plus apt); CA
    # certificates are included so the runtime stage needs no network to install them.
    debootstrap --variant=minbase --include=ca-certificates "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
        tail -20 "$cache/debootstrap.log" >&2
        exit 1
    }
    # Trim it the way Debian's official -slim images are trimmed: no documentation, manual pages
    # or translations, now or for packages installed later, and no package lists or caches.
    cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
CFG
    find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete 2>/dev/null || true
    rm -rf "$root/usr/share/man"/* "$root/usr/share/info"/* "$root/usr/share/locale"/* \
        "$root/var/lib/apt/lists"/* "$root/var/cache/apt"/*.bin "$root/var/cache/apt/archives"/*.deb \
        "$root/var/log"/*.log "$root/var/cache/debconf"/*-old
    # The image must not carry this machine's name or resolver.
    : >"$root/etc/hostname"
    : >"$root/etc/resolv.conf"
    tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
fi
docker import --change 'CMD ["bash"]' "$tarball" "$tag" >/dev/null
echo "base-images: imported $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
