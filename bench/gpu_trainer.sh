#!/usr/bin/env bash
# The trainer on a GPU, as one prepared script for a lent GPU machine (docs/trainer-scaling.md): for the 0.5B and
# 1.5B shapes (random weights from each model's config.json: the FLOPs, memory and kernels are the real model's), the
# TRR++ update against a plain cross-entropy step in bf16 with MFU (bench/trainer.py), then each shape's peak memory,
# then (with PUSH=1) a push's time (bench/push_time.py). Each part is its own call with its own time limit and
# writes its JSON as soon as it is done, so a lease that runs out keeps what finished.
#   bash bench/gpu_trainer.sh MODELS_DIR OUT_DIR [WHEELS_DIR]
# MODELS_DIR holds one folder per shape (config.json; the tokenizer in the first folder that has one, shared by all);
# WHEELS_DIR, where given, holds wheels of the
# Python packages the machine lacks (pydantic and its kin: installed offline into /tmp/site, put on PYTHONPATH).
set -uo pipefail
models="$1"; out="$2"; wheels="${3:-}"
python=${PYTHON:-python3}
mkdir -p "$out"
if [[ -n "$wheels" ]]; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$wheels"/*.whl 2>&1 | tail -2
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
"$python" - <<'PY' | tee "$out/versions.txt"
import torch, transformers, peft
print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__,
      "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY
# The distributed profile's shape of a batch: B = 16 per group, prompts ~512, responses ~1,024 tokens; micro-batch 8,
# no activation checkpointing; the baseline computes logits only where the loss is (the PPO terms are the difference).
tokenizer=$(dirname "$(ls "$models"/*/tokenizer.json | head -1)")
common=(--tokenizer "$tokenizer" --random-init --device cuda --per-group 16 --prompt-len 512 --response-len 1024 --micro-batch-size 8
        --repeats 2 --threads 8 --plain-logits response)
for shape in "$models"/*/; do
  name=$(basename "$shape")
  timeout "${THROUGHPUT_S:-150}" "$python" bench/trainer.py --model "$shape" "${common[@]}" --only throughput \
      --json-out "$out/trainer-$name.json" 2>&1 | grep -v "it/s\]" | tee "$out/trainer-$name.txt"
done
for shape in "$models"/*/; do
  name=$(basename "$shape")
  timeout "${MEMORY_S:-120}" "$python" bench/trainer.py --model "$shape" "${common[@]}" --only memory \
      --micro-batch-sizes "${MEMORY_SIZES:-8}" --json-out "$out/memory-$name.json" 2>&1 | grep -v "it/s\]" \
      | tee "$out/memory-$name.txt"
done
if [[ "${PUSH:-0}" == 1 ]]; then
  for shape in "$models"/*/; do
    name=$(basename "$shape")
    timeout 60 "$python" bench/push_time.py --model "$shape" --random-init --device cuda --repeats 3 \
        --out "$out/push-$name.json" 2>&1 | grep -v "it/s\]" | tail -3
  done
fi
