"""The time of one weight push on this machine: the trainer writes its weights (trainer_svc/weight_export.py) and an
in-process engine takes them (`update_weights`), for full fine-tuning (the merged bf16 directory) and for LoRA (the
merged directory, and the adapter directory the llama.cpp engine takes).

    python bench/push_time.py --model DIR_WITH_CONFIG [--random-init] [--device cuda] [--repeats 3] [--out FILE]

`--random-init` builds the model from its config.json with random weights (the bytes and the kernels are the real
model's; the values do not matter for a push). The engine is the torch engine on `--device` (its load is what a
restarted SGLang server also pays, less SGLang's own start); the llama.cpp engine is timed by bench/engine_compare.py.
Prints the median seconds of each part and writes them to --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from services.inference.local_engine import LocalEngine, load_causal_lm  # noqa: E402
from services.settings import Settings  # noqa: E402


def build_model(model_dir: Path, random_init: bool, device: torch.device) -> torch.nn.Module:
    if not random_init:
        return load_causal_lm(model_dir, device, torch.float32, progress_bar=False)
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32).to(device).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--random-init", action="store_true")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from trainer_svc.lora import add_adapters
    from trainer_svc.weight_export import write_serving_weights

    device = torch.device(args.device)
    model = build_model(args.model, args.random_init, device)
    engine = LocalEngine(args.model, device=args.device, dtype=torch.bfloat16) if not args.random_init else None
    results: dict[str, list[float]] = {"full_write_s": [], "full_load_s": [], "lora_merged_write_s": [],
                                       "lora_adapter_write_s": []}
    with tempfile.TemporaryDirectory() as run_dir:
        for repeat in range(args.repeats):
            started = time.perf_counter()
            path = write_serving_weights(Path(run_dir), model, repeat + 1)
            results["full_write_s"].append(time.perf_counter() - started)
            if engine is None:  # random weights: the engine starts from the first push, its tokenizer copied in
                for tokenizer_file in args.model.glob("*token*"):
                    shutil.copy(tokenizer_file, path / tokenizer_file.name)
                engine = LocalEngine(path, device=args.device, dtype=torch.bfloat16)
            started = time.perf_counter()
            engine.update_weights(str(path), repeat + 1)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            results["full_load_s"].append(time.perf_counter() - started)
        adapted = add_adapters(model, Settings(lora_rank=16, lora_alpha=32.0).trainer.lora, args.model)
        for repeat in range(args.repeats):
            version = 100 + repeat
            started = time.perf_counter()
            write_serving_weights(Path(run_dir), adapted, version)
            results["lora_merged_write_s"].append(time.perf_counter() - started)
            started = time.perf_counter()
            write_serving_weights(Path(run_dir), adapted, version + 50, form="adapter")
            results["lora_adapter_write_s"].append(time.perf_counter() - started)
    medians = {key: round(statistics.median(values), 3) for key, values in results.items()}
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(json.dumps({"model": str(args.model), "device": name, "repeats": args.repeats, **medians}))
    if args.out:
        args.out.write_text(json.dumps({"model": str(args.model), "device": name, "runs": results,
                                        "medians": medians}, indent=2) + "\n")


if __name__ == "__main__":
    main()
