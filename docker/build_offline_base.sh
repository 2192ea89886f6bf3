#!/usr/bin/env bash
# Build a Python base image (default tag azr-python-base:3.11) with no registry, for the application Dockerfile's
# BASE_IMAGE build argument: `docker build --build-arg BASE_IMAGE=azr-python-base:3.11 ...`.
#
# Two steps, reusing the executor's offline recipe instead of copying it:
#   1. executor_svc/image/build_offline.sh makes a rootfs image from this host's Debian python3.11 (interpreter, its
#      shared libraries, the stdlib, /bin/sh) under the tag azr-python-rootfs:<version>;
#   2. docker/offline-base.Dockerfile adds the system libraries manylinux wheels expect (libstdc++, libgcc_s, glibc's
#      libpthread/libdl/librt stubs), the host's bubblewrap with the libraries it loads (the executor's sandbox in
#      a Kubernetes pod; docs/isolation.md), the host's CA bundle and pip (bootstrapped from Debian's python-wheels
#      copy, else a wheel pip downloads from PyPI).
# The result is what python:3.11-slim + Debian's bubblewrap is for our Dockerfile: python3 + pip + bwrap on PATH, runs
# as root until the Dockerfile switches user. Limits: x86_64 Debian hosts (the library directory is
# x86_64-linux-gnu); no compilers, so every dependency must come as a wheel.
#
# Usage: build_offline_base.sh [--force] [TAG]   (idempotent: exits at once when TAG exists, unless --force)
# Env:   DOCKER (client binary), PYTHON (host interpreter, default /usr/bin/python3.11).
set -euo pipefail

force=0
if [[ "${1:-}" == "--force" ]]; then force=1; shift; fi
tag="${1:-azr-python-base:3.11}"
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
docker="${DOCKER:-$( [[ -x /usr/bin/docker ]] && echo /usr/bin/docker || command -v docker )}"
python="${PYTHON:-/usr/bin/python3.11}"
export DOCKER="$docker" PYTHON="$python"

# An image built before bubblewrap was part of the base is rebuilt (the application Dockerfile needs bwrap in it).
if ((force == 0)) && "$docker" image inspect "$tag" >/dev/null 2>&1 \
    && "$docker" run --rm --network none --entrypoint /usr/bin/bwrap "$tag" --version >/dev/null 2>&1; then
  echo "build_offline_base: $tag exists (use --force to rebuild)"
  exit 0
fi
bwrap="$(command -v bwrap || true)"
if [[ -z "$bwrap" ]]; then
  echo "build_offline_base: needs Debian's bubblewrap on this host (apt-get install bubblewrap)" >&2
  exit 1
fi
version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
rootfs_tag="azr-python-rootfs:$version"
rootfs_flags=()
((force == 1)) && rootfs_flags+=(--force)
bash "$repo/executor_svc/image/build_offline.sh" "${rootfs_flags[@]}" "$rootfs_tag"

context="$(mktemp -d /tmp/azr-python-base.XXXXXX)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/lib" "$context/bin" "$context/wheels"
# glibc's compatibility stubs (libpthread, libdl, librt, libutil: empty since 2.34 but still NEEDED by manylinux
# wheels such as torch), libm/libresolv/libz, and the C++ runtime.
for library in libstdc++.so.6 libgcc_s.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libutil.so.1 libm.so.6 \
    libresolv.so.2 libz.so.1; do
  # awk reads to the end (no early `exit`): an early exit would SIGPIPE ldconfig, and pipefail turns that into 141.
  path="$(ldconfig -p | awk -v name="$library" '$1 == name && /x86-64/ && !found {print $NF; found = 1}')"
  [[ -n "$path" ]] || { echo "build_offline_base: $library not found on this host (ldconfig -p)" >&2; exit 1; }
  cp -L "$path" "$context/lib/$library"
done
# bubblewrap (not setuid: it sandboxes through unprivileged user namespaces) and the libraries it loads.
cp -L "$bwrap" "$context/bin/bwrap"
ldd "$bwrap" | awk '/=> \// {print $3}' | while read -r library; do
  [[ "$(basename "$library")" == libc.so.6 ]] || cp -L "$library" "$context/lib/$(basename "$library")"
done
cp -L "${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" "$context/ca-certificates.crt"
pip_wheel="$(ls /usr/share/python-wheels/pip-*.whl 2>/dev/null | head -n1 || true)"
if [[ -n "$pip_wheel" ]]; then
  cp "$pip_wheel" "$context/wheels/"
else
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$context/wheels" pip \
    || "$repo/.venv/bin/python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$context/wheels" pip
fi
cp "$here/offline-base.Dockerfile" "$context/Dockerfile"
"$docker" build --quiet --network host --build-arg "ROOTFS_IMAGE=$rootfs_tag" -t "$tag" "$context" >/dev/null
"$docker" run --rm --network none "$tag" python3 -c 'import ssl, sqlite3, venv, pip; print("ok")' | grep -qx ok
"$docker" run --rm --network none --entrypoint /usr/bin/bwrap "$tag" --version | grep -q '^bubblewrap'
echo "build_offline_base: built $tag ($("$docker" image inspect -f '{{.Size}}' "$tag") bytes, python $version)"
