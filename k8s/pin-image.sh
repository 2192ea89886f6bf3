#!/usr/bin/env bash
# Push the image built from the Dockerfile and pin the production overlays to its digest (issue 37: never a tag that
# can move under a running cluster). Writes `images: azr -> REGISTRY/azr@sha256:...` into overlays/gpu (which
# overlays/gpu-multinode builds on).
#
# Usage: k8s/pin-image.sh REGISTRY/azr:TAG        (after `docker build -t REGISTRY/azr:TAG .`)
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 REGISTRY/azr:TAG" >&2; exit 2; }
image="$1"
docker push "$image" >/dev/null
pinned="$(docker inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$image" | grep -m1 "^${image%:*}@sha256:")"
[[ -n "$pinned" ]] || { echo "pin-image: no registry digest for $image after the push" >&2; exit 1; }
cd "$(dirname "$0")/overlays/gpu"
kubectl kustomize --help >/dev/null 2>&1 && command -v kustomize >/dev/null || true
if command -v kustomize >/dev/null; then
  kustomize edit set image "azr=$pinned"
else  # kubectl's embedded kustomize has no `edit`: rewrite the two lines ourselves
  python3 - "$pinned" <<'PY'
import re, sys
name, digest = sys.argv[1].split("@")
path = "kustomization.yaml"
text = open(path).read()
text = re.sub(r"(- name: azr\n\s+newName: ).*\n(\s+)(digest|newTag): .*", rf"\g<1>{name}\n\g<2>digest: {digest}", text)
open(path, "w").write(text)
PY
fi
echo "pin-image: overlays/gpu now pulls $pinned"
