#!/usr/bin/env bash
# Build (once) a local Debian bookworm base image with python3 + venv, for machines that reach the
# Debian mirror and PyPI but no container registry. The result is cached as a Docker image and
# the debootstrap tree under CACHE_DIR, so a second call returns in about a second.
#   tests/container/base_image.sh [IMAGE]    # default IMAGE: airwave-base:bookworm
set -euo pipefail
image="${1:-airwave-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${CACHE_DIR:-/var/cache/airwave-base}"
if docker image inspect "$image" >/dev/null 2>&1; then
    echo "$image"
    exit 0
fi
root="$cache/rootfs"
if [ ! -x "$root/usr/bin/python3" ]; then
    rm -rf "$root"
    mkdir -p "$root"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$root" "$mirror" >&2
    # Keep the image small: no package lists or downloaded archives.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
fi
# The host's trust store, not the rootfs's own: where HTTPS to PyPI passes an intercepting proxy,
# its CA is only in the host's bundle, and the image's pip/uv must trust what the host trusts.
cp "${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" "$root/etc/ssl/certs/ca-certificates.crt"
tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' - "$image" >&2
echo "$image"
