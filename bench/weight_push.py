"""The cost of one weight push, write + load + continue, on a real `azr serve inference` server: the bf16 weights-only
export pushed after every update now (trainer_svc/weight_export.py) against the old push, the full resumable
checkpoint (fp32 weights, AdamW moments, RNG, fsync; trainer_svc/checkpoints.py) written and loaded every update.
Both measured in the same run, alternately, on the same trainer and server.

Each push: write the directory (timed), then `SGLangClient.update_weights` on the server: pause →
update_weights_from_disk → continue → /model_info check (timed). Reports per variant the median write, load and total
seconds, the bytes written, and the ratio old / new (how many times cheaper the push became). The trainer's AdamW
moments are filled by one optimizer step on zero gradients, so the full checkpoint has its real size.

    .venv/bin/python bench/weight_push.py [--model qwen-coder-0.5b] [--repeats 2]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from bench.served_model import ServedModel  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402
from services.inference.sglang_client import SGLangClient  # noqa: E402
from services.settings import Settings  # noqa: E402
from trainer_svc.checkpoints import save_checkpoint  # noqa: E402
from trainer_svc.resume import LoadedPolicy, fresh_trainer  # noqa: E402
from trainer_svc.weight_export import write_serving_weights  # noqa: E402


def tree_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def fill_adam_moments(loaded: LoadedPolicy) -> None:
    """One AdamW step on zero gradients: the moments exist at full size, the weights barely move."""
    for parameter in loaded.trainer.model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    loaded.trainer.optimizer.step()
    loaded.trainer.optimizer.zero_grad(set_to_none=True)


def push_old(loaded: LoadedPolicy, root: Path, version: int, settings: Settings) -> Path:
    """The old push's directory: the full checkpoint, as save_checkpoint writes it (atomic, fsynced)."""
    trainer = loaded.trainer
    return save_checkpoint(root, model=trainer.model, tokenizer=loaded.tokenizer, optimizer=trainer.optimizer,
                           step=version, policy_version=version, settings_json=settings.resolved(), keep=2)


def push_new(loaded: LoadedPolicy, root: Path, version: int, settings: Settings) -> Path:
    """The new push's directory: bf16 weights only."""
    return write_serving_weights(root, loaded.trainer.model, version)


VARIANTS = {"full checkpoint (old)": push_old, "bf16 weights (new)": push_new}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    model_dir = resolve_model(args.model)
    settings = Settings(device="cpu", run_root=Path(tempfile.gettempdir()), run_id="bench-weight-push")
    loaded = fresh_trainer(model_dir, settings.trainer)
    fill_adam_moments(loaded)
    params = sum(p.numel() for p in loaded.trainer.model.parameters())
    print(f"model {args.model}: {params / 1e6:.0f}M parameters; trainer on CPU ({torch.get_num_threads()} threads)")
    work = Path(tempfile.mkdtemp(prefix="azr-bench-push-"))
    timings: dict[str, dict[str, list[float]]] = {name: {"write": [], "load": [], "bytes": []} for name in VARIANTS}
    version = 0
    try:
        with ServedModel(args.model) as server:
            client = SGLangClient([server.url], model_dir, timeout=1800)
            for repeat in range(args.repeats):
                for name, write in VARIANTS.items():
                    version += 1
                    started = time.perf_counter()
                    directory = write(loaded, work / name.split()[0], version, settings)
                    written = time.perf_counter()
                    client.update_weights(str(directory), version)
                    loaded_at = time.perf_counter()
                    timings[name]["write"].append(written - started)
                    timings[name]["load"].append(loaded_at - written)
                    timings[name]["bytes"].append(tree_bytes(directory))
                    print(f"  repeat {repeat + 1} {name}: write {written - started:.1f} s, load + continue "
                          f"{loaded_at - written:.1f} s, {tree_bytes(directory) / 1e9:.2f} GB", flush=True)
            client.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nmedian of {args.repeats}: write | load + continue | push total | written")
    totals = {}
    for name, figures in timings.items():
        write, load = statistics.median(figures["write"]), statistics.median(figures["load"])
        totals[name] = write + load
        print(f"  {name:22s} {write:6.1f} s | {load:6.1f} s | {write + load:6.1f} s | "
              f"{statistics.median(figures['bytes']) / 1e9:5.2f} GB")
    old, new = totals["full checkpoint (old)"], totals["bf16 weights (new)"]
    print(f"\npush cost ratio old / new: {old / new:.2f}x  (new push {new:.1f} s against {old:.1f} s)")


if __name__ == "__main__":
    main()
