"""Worker script for test_fsdp_update.py, run under `torchrun --nproc_per_node N` (gloo on CPU; NCCL when the settings'
device is CUDA, as test_cuda_trainer.py runs it).

Phase 1: a fresh FSDP trainer trains on batch 1 and writes checkpoint v1. Phase 2: every rank restores from the run's
latest checkpoint (v1), trains on batch 2 and writes v2. Rank 0 drives with the real command protocol (`update`
and `checkpoint_trainer` announce, `release_followers` ends each phase); the other ranks run `follow_main_rank`.
Rank 0 writes both update reports, its timings and how often its decoder layers ran (`layer_calls`: calls of the
layer modules; `mlp_calls`: calls of their MLPs, which a checkpointed layer's recomputation in the backward pass runs
a second time) as JSON to --report.

    torchrun --standalone --nproc_per_node 2 fsdp_update_script.py --model DIR --run-dir DIR \\
        --settings-json '{...}' --batch b1.jsonl --batch b2.jsonl --report out.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from services.records import Episode
from services.settings import Settings
from trainer_svc.activation_checkpointing import decoder_layers
from trainer_svc.distributed_env import init_from_torchrun, shutdown
from trainer_svc.rank_follower import follow_main_rank, release_followers
from trainer_svc.resume import LoadedPolicy, checkpoint_trainer, fresh_trainer, restore_trainer


def read_batch(path: Path) -> list[Episode]:
    return [Episode.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def count_layer_calls(loaded: LoadedPolicy, counts: dict[str, int]) -> None:
    """Count forward calls of every decoder layer (a module hook) and of every layer's MLP (its `forward` wrapped:
    module hooks do not fire inside a checkpoint's recomputation) into ``counts``."""
    def layer_hook(*_: object) -> None:
        counts["layer_calls"] += 1

    def counted(forward):
        def run(*args, **kwargs):
            counts["mlp_calls"] += 1
            return forward(*args, **kwargs)
        return run

    for layer in decoder_layers(loaded.trainer.model):
        layer.register_forward_hook(layer_hook)
        layer.mlp.forward = counted(layer.mlp.forward)


def one_phase(loaded: LoadedPolicy, settings: Settings, run_dir: Path, batch: list[Episode],
              version: int) -> dict | None:
    """Rank 0: update on ``batch``, checkpoint as ``version``, release the others; they follow."""
    ranks = loaded.trainer.ranks
    assert ranks is not None
    if not ranks.is_main:
        follow_main_rank(loaded, settings.trainer, run_dir, settings.resolved())
        return None
    report = loaded.trainer.update(batch)
    checkpoint_trainer(loaded, run_dir, settings.trainer, settings_record=settings.resolved(),
                       policy_version=version, applied_episode_ids=[e.id for e in batch])
    release_followers(loaded)
    return report.model_dump(mode="json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--settings-json", required=True)
    parser.add_argument("--batch", type=Path, action="append", required=True)
    parser.add_argument("--report", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    settings = Settings(**json.loads(args.settings_json))
    ranks = init_from_torchrun(settings.run.device)
    reports = []
    counts = {"layer_calls": 0, "mlp_calls": 0}
    loaded = fresh_trainer(args.model, settings.trainer, ranks)
    count_layer_calls(loaded, counts)
    for version, batch_file in enumerate(args.batch, start=1):
        if version > 1:  # resume as a restarted trainer would: every rank from the latest checkpoint
            restored = restore_trainer(args.run_dir, settings.trainer, ranks)
            assert restored is not None and restored.trainer.policy_version == version - 1
            loaded = restored
            count_layer_calls(loaded, counts)
        reports.append(one_phase(loaded, settings, args.run_dir, read_batch(batch_file), version))
    if ranks.is_main:
        args.report.write_text(json.dumps({"world_size": ranks.world_size, "reports": reports, **counts}))
    shutdown()


if __name__ == "__main__":
    main()
