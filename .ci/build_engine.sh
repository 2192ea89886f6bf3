#!/usr/bin/env bash
# Build and install llama-cpp-python, the llama.cpp engine's bindings (services/inference/llama_cpp_engine.py), into
# the virtual environment: `make engine`. PyPI has only its source, so the first install compiles llama.cpp (~6 min
# on 2 cores) for this CPU's own instruction set (GGML_NATIVE); the wheel is kept in ~/.cache/azr/wheels under a key
# of the version and the CPU's flags, so later installs (a new venv, a clean clone, CI on the same machine) take
# seconds. Without a compiler the build fails and the torch engine stays the engine (AZR_LOCAL_ENGINE=auto says so).
# Usage: bash .ci/build_engine.sh PYTHON VERSION
set -euo pipefail
python="$1"
version="$2"
flags_key=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c1-12 || echo generic)
cache="${AZR_WHEEL_CACHE:-$HOME/.cache/azr/wheels}/llama-cpp-python-$version-$flags_key"
wheel=$(ls "$cache"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -1 || true)
if [[ -z "$wheel" ]]; then
  echo "engine: compiling llama-cpp-python $version for this CPU (once, ~6 min on 2 cores; cached in $cache)"
  mkdir -p "$cache"
  # no llava/mtmd library, tests, examples, tools or server: the engine calls libllama only
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
    "$python" -m pip wheel -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -w "$cache"
  wheel=$(ls "$cache"/llama_cpp_python-"$version"-*.whl | head -1)
fi
"$python" -m pip install -q "$wheel" "diskcache>=5.6.1" "jinja2>=2.11.3"
"$python" -c "import llama_cpp; print('engine: llama-cpp-python', llama_cpp.__version__, 'ready')"
