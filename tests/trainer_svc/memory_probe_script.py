"""Worker for test_memory_bound.py, run in a fresh process: the peak memory of TRR++ updates of a wide-vocabulary
model (V = 65,536, H = 32: the logits of a token are 2,048 times its hidden state, as a 152k vocabulary is 170 times
the 0.5B model's) for several (token cap, batch, response length) configurations, printed as JSON.

Measurement: the process's peak RSS over each update (`trainer_svc.memory`: VmHWM reset through clear_refs) minus its
RSS just before it. The parent starts this with MALLOC_MMAP_THRESHOLD_ fixed at 64 KiB, so every tensor above that
size is its own mapping, returned to the kernel when freed: RSS then follows the live tensors, and a peak cannot hide
in (or be inflated by) heap pages the allocator kept from an earlier update. A warm-up update first allocates the
AdamW moments, so each measured update starts from the same resident state.

    python memory_probe_script.py '[{"cap": 256, "per_group": 1, "prompt": 8, "response": 24}, ...]'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from services.algorithm.task_types import TASK_GROUPS
from services.records import Episode
from services.settings import Settings
from trainer_svc.ppo_update import PolicyTrainer

VOCAB, HIDDEN = 65_536, 32
CHUNK_TOKENS = 32


def wide_vocab_model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         tie_word_embeddings=True)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def episodes(per_group: int, prompt: int, response: int) -> list[Episode]:
    g = torch.Generator().manual_seed(per_group * 1000 + response)
    return [Episode(id=f"m-{i}", run_id="mem", step=0, task_type=t, role=r,
                    prompt_ids=torch.randint(1, VOCAB, (prompt,), generator=g).tolist(),
                    response_ids=torch.randint(1, VOCAB, (response,), generator=g).tolist(),
                    reward=float(i % 3) - 1.0, policy_version=0)
            for i, (t, r) in enumerate(TASK_GROUPS * per_group)]


def resident_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    torch.set_num_threads(1)
    configs = json.loads(sys.argv[1])
    # Table 3's update (every batch steps, every episode forwarded): these rewards leave every advantage 0, and the
    # probe measures what the whole batch costs.
    settings = Settings(device="cpu", micro_batch_size=1024, logprob_chunk_tokens=CHUNK_TOKENS,
                        gradient_checkpointing=False, trainer_bf16_cpu=False, run_root=Path("/nonexistent"),
                        entropy_coef=0.001, skip_zero_advantage_batches=False)
    trainer = PolicyTrainer(wide_vocab_model(), settings.trainer, pad_id=0, device=torch.device("cpu"))
    trainer.settings = settings.trainer.model_copy(update={"micro_batch_tokens": 64})
    trainer.update(episodes(2, 8, 8))  # warm-up, 3 micro-batches: AdamW moments and lazy buffers exist from here on
    results = []
    for config in configs:
        trainer.settings = settings.trainer.model_copy(update={"micro_batch_tokens": config["cap"]})
        batch = episodes(config["per_group"], config["prompt"], config["response"])
        before = resident_mb()
        report = trainer.update(batch)
        assert report.memory_kind == "cpu_peak_rss", report.memory_kind
        results.append({**config, "peak_above_mb": report.peak_memory_mb - before,
                        "micro_batches": report.micro_batches, "padded_tokens": report.padded_tokens,
                        "tokens": report.tokens})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
