#!/usr/bin/env bash
# The trainer on a GPU, as one prepared script for a lent GPU machine (docs/trainer-scaling.md): for the 0.5B and
# 1.5B shapes (random weights from each model's config.json: the FLOPs, memory and kernels are the real model's), the
# TRR++ update against a plain cross-entropy step in bf16 with MFU (bench/trainer.py), then a push's time
# (bench/push_time.py: the bf16 export and its load by the engine; LoRA's merged and adapter exports).
#   bash bench/gpu_trainer.sh MODELS_DIR OUT_DIR [WHEELS_DIR]
# MODELS_DIR holds one folder per shape (config.json + tokenizer); WHEELS_DIR, where given, holds wheels of the
# Python packages the machine lacks or has in other versions (installed offline first).
set -uo pipefail
models="$1"; out="$2"; wheels="${3:-}"
python=${PYTHON:-python3}
mkdir -p "$out"
if [[ -n "$wheels" ]]; then
  "$python" -m pip install -q --no-index --find-links "$wheels" "$wheels"/*.whl 2>&1 | tail -2
fi
"$python" - <<'PY' | tee "$out/versions.txt"
import torch, transformers, peft
print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__,
      "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY
for shape in "$models"/*/; do
  name=$(basename "$shape")
  timeout 200 "$python" bench/trainer.py --model "$shape" --random-init --device cuda --per-group 16 \
      --prompt-len 512 --response-len 1024 --micro-batch-size 8 --micro-batch-sizes 4,8,16 --repeats 2 --threads 8 \
      2>&1 | grep -v "it/s\]" | tee "$out/trainer-$name.txt"
  timeout 60 "$python" bench/push_time.py --model "$shape" --random-init --device cuda --repeats 3 \
      --out "$out/push-$name.json" 2>&1 | grep -v "it/s\]" | tail -3
done
