#!/usr/bin/env bash
# Build the executor image (azr-executor:1 by default) with no registry: copy this host's Debian python3.11, the
# shared libraries it and its extension modules load, its stdlib (minus test suites) and /bin/sh into a fresh rootfs,
# then `tar | docker import`. The result is equivalent to executor_svc/image/Dockerfile for our purpose: a python3
# on PATH with the full stdlib, /bin/sh, a non-root default user (65534), nothing else. The worker program itself is
# not baked in: the docker backend sends it to each container at start (so the image never goes stale).
#
# Usage: build_offline.sh [--force] [TAG]     (idempotent: exits at once when TAG exists, unless --force)
# Env:   DOCKER (client binary; default Debian's /usr/bin/docker), PYTHON (default /usr/bin/python3.11).
set -euo pipefail

force=0
if [[ "${1:-}" == "--force" ]]; then force=1; shift; fi
tag="${1:-azr-executor:1}"
docker="${DOCKER:-$( [[ -x /usr/bin/docker ]] && echo /usr/bin/docker || command -v docker )}"
python="${PYTHON:-/usr/bin/python3.11}"

if ((force == 0)) && "$docker" image inspect "$tag" >/dev/null 2>&1; then
  echo "build_offline: $tag exists (use --force to rebuild)"
  exit 0
fi
[[ -x "$python" ]] || { echo "build_offline: no interpreter at $python" >&2; exit 1; }
version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
stdlib="$("$python" -S -c 'import os; print(os.path.dirname(os.__file__))')"
real_python="$(readlink -f "$python")"

rootfs="$(mktemp -d /tmp/azr-executor-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT

# Debian 12 is merged-/usr: the top-level dirs are links into /usr, as on the host.
mkdir -p "$rootfs"/usr/{bin,lib,lib64} "$rootfs"/{etc,tmp,proc,dev,sys}
ln -s usr/bin "$rootfs/bin"; ln -s usr/lib "$rootfs/lib"; ln -s usr/lib64 "$rootfs/lib64"; ln -s usr/bin "$rootfs/sbin"
chmod 1777 "$rootfs/tmp"

copy_file() {  # copy (dereferenced) to the same path, with / links resolved in the directory part only
  local source="$1" directory
  directory="$(readlink -f "$(dirname "$source")")"
  mkdir -p "$rootfs$directory"
  cp -L --preserve=mode "$source" "$rootfs$directory/$(basename "$source")"
}
copy_libraries() {  # the shared libraries an ELF file loads (ldd prints "name => /path (addr)" or "/path (addr)")
  ldd "$1" 2>/dev/null | awk '/=> \// {print $3} /^[[:space:]]*\/[^ ]+ \(/ {print $1}' | while read -r library; do
    copy_file "$library"
  done
}

copy_file "$real_python"
ln -sf "$(basename "$real_python")" "$rootfs/usr/bin/python3"
copy_libraries "$real_python"
mkdir -p "$rootfs$stdlib"
tar -C "$stdlib" --exclude=./test --exclude=./idlelib --exclude=./tkinter --exclude=./turtledemo \
  --exclude=./site-packages --exclude=./dist-packages -cf - . | tar -C "$rootfs$stdlib" -xf -
for module in "$stdlib"/lib-dynload/*.so; do
  copy_libraries "$module"
done
copy_file "$(readlink -f /bin/sh)"
ln -sf "$(basename "$(readlink -f /bin/sh)")" "$rootfs/usr/bin/sh"
copy_libraries "$(readlink -f /bin/sh)"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"

# The image must run python before we tag it: check the rootfs with chroot when we can (root), then import.
if [[ "$(id -u)" == 0 ]]; then
  chroot "$rootfs" /usr/bin/python3 -s -S -c 'import json, collections, math, re, decimal, hashlib, _ctypes, select'
fi
tar -C "$rootfs" --numeric-owner --owner=0 --group=0 -cf - . | "$docker" import \
  --change 'USER 65534:65534' --change 'WORKDIR /tmp' --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'CMD ["python3"]' --change "LABEL azr.executor.image=offline azr.executor.python=$version" \
  - "$tag" >/dev/null
"$docker" run --rm --network none --user 65534:65534 "$tag" python3 -s -S -c 'import json; print("ok")' | grep -qx ok
echo "build_offline: built $tag ($("$docker" image inspect -f '{{.Size}}' "$tag") bytes, python $version)"
