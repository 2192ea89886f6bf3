#!/usr/bin/env bash
# The test suite as a newcomer's bare laptop runs `make test`: no bubblewrap, Docker, Chromium, kubectl/kustomize
# or GPU, and no AZR_REQUIRE_SERVICES, so whatever needs one of them must be skipped with its reason, not fail.
# Redis and PostgreSQL stay available (tests/conftest.py skips without them too; CI checks them elsewhere).
#
# Hiding: PATH becomes a directory of symlinks to every executable on PATH except the tools below. Some callers do
# not look on PATH (the executor finds bubblewrap only in the fixed system PATH, on purpose; the docker SDK talks to
# the socket; the compose test prefers /usr/bin/docker), so as root the script re-runs itself in a private mount
# namespace and binds /dev/null over every copy of those tools and over the Docker socket. Nothing outside that
# namespace changes. Without root (or without unshare) only the PATH and DOCKER_HOST are changed, and it says so.
#
# Afterwards it checks that each hidden tool's skip reason appears in the log: a run that skipped none of them
# would not have tested a bare machine. Usage: bash .ci/bare_test.sh [LOG_FILE]   (default runs/bare-test.log)
set -euo pipefail
cd "$(dirname "$0")/.."
log="${1:-runs/bare-test.log}"

hidden=(bwrap docker dockerd docker-compose containerd runc chromium chromium-browser google-chrome kubectl kustomize
        nvidia-smi)
expected_skips=("bubblewrap is not usable here" "the docker backend cannot run here" "chromium is not installed"
                "no kustomize" "needs a CUDA GPU")

if [[ "${AZR_BARE_NAMESPACE:-}" != 1 && $EUID -eq 0 ]] && unshare --mount --propagation private true 2>/dev/null; then
  exec env AZR_BARE_NAMESPACE=1 unshare --mount --propagation private bash "$0" "$@"
fi

if [[ "${AZR_BARE_NAMESPACE:-}" == 1 ]]; then
  declare -A covered=()
  for name in "${hidden[@]}"; do
    for dir in ${PATH//:/ } /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
      [[ -e "$dir/$name" ]] || continue
      real="$(realpath "$dir/$name")"
      [[ -n "${covered[$real]:-}" ]] && continue
      mount --bind /dev/null "$real"
      covered[$real]=1
    done
  done
  for socket in /var/run/docker.sock /run/docker.sock; do
    if [[ -S "$socket" ]]; then mount --bind /dev/null "$socket"; fi
  done
  echo "bare_test: private mount namespace; ${hidden[*]} and the Docker socket hidden"
else
  echo "bare_test: no private mount namespace (needs root and unshare): tools hidden from PATH only" >&2
fi

bare_bin="$(mktemp -d)"
trap 'rm -rf "$bare_bin"' EXIT
for dir in ${PATH//:/ }; do
  [[ -d "$dir" ]] || continue
  for tool in "$dir"/*; do
    name="${tool##*/}"
    [[ -x "$tool" && ! -d "$tool" && ! -e "$bare_bin/$name" ]] || continue
    [[ " ${hidden[*]} " == *" $name "* ]] && continue
    ln -s "$tool" "$bare_bin/$name"
  done
done
export PATH="$bare_bin"
export DOCKER_HOST=unix:///nonexistent/docker.sock CUDA_VISIBLE_DEVICES=""
unset AZR_REQUIRE_SERVICES DOCKER

for name in "${hidden[@]}"; do
  if command -v "$name" >/dev/null; then echo "bare_test: $name is still visible" >&2; exit 1; fi
done

mkdir -p "$(dirname "$log")"
echo "bare_test: make test (log: $log)"
status=0
make test 2>&1 | tee "$log" || status=$?
if ((status != 0)); then
  echo "bare_test: the suite failed on a bare machine (exit $status); see $log" >&2
  exit "$status"
fi
for reason in "${expected_skips[@]}"; do
  if ! grep -q -- "$reason" "$log"; then
    echo "bare_test: no test was skipped for '$reason': the tool was not hidden, or the skip reason changed" >&2
    exit 1
  fi
done
echo "bare_test: passed; $(grep -E '^=+ .*(passed|failed).* =+$' "$log" | tail -n1)"
