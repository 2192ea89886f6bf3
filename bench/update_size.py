"""How far TRR++ updates move a real model on real episodes, per learning rate, full fine-tuning vs LoRA.

    python bench/update_size.py tests/data/model_text/qwen-coder-0.5b.jsonl --per-group 4 --updates 2 \
        --config full:1e-6 --config lora16:1e-5 --config lora16:1e-4 --config lora16:5e-4

The episodes are the corpus's solver responses (real text of the default model at step 0), rewarded as the step
would reward them (Eq 5/6: the format check, then the executor's answer check: +1 / −0.5 / −1), re-tokenised after
their prompts rebuilt from the rows' contexts. Each configuration starts from the base weights and makes `--updates`
updates on that same batch; after each it prints what the trainer reports (approx KL, clip fraction, grad norm) and
the KL between the policy before and after it (per response token), and the change since the base weights of the
mean per-token log-probability of the responses the batch rewards above their group's mean (advantage > 0) and
below it. A learning rate is large enough for a CPU run when one update moves those two apart
visibly, and not too large while the KL per update stays small (PPO's clip keeps it bounded; here it is measured).
This is the short measurement behind the learning preset (configs/learn-cpu.toml); it is not a learning run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import fmean
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.trainer import FULL_UPDATE  # noqa: E402
from executor_svc.executor import Executor  # noqa: E402
from services.algorithm.parsing import (  # noqa: E402
    AbductionSolution,
    DeductionSolution,
    InductionSolution,
    read_response,
)
from services.algorithm.prompts import ReferenceTriplet, induction_solver_prompt, solver_prompt  # noqa: E402
from services.algorithm.task_types import Role, TaskType  # noqa: E402
from services.inference.chat_codec import PromptCodec  # noqa: E402
from services.inference.model_registry import resolve_model  # noqa: E402
from services.records import Episode  # noqa: E402
from services.reporting.response_reading import parse_kind  # noqa: E402
from services.settings import Settings  # noqa: E402
from trainer_svc.policy_forward import logprobs_and_entropy  # noqa: E402
from trainer_svc.resume import fresh_trainer  # noqa: E402


def solver_reward(executor: Executor, task_type: TaskType, row: dict[str, Any]) -> float:
    """Eq 5/6 for one solver response: −1 format error, else +1 right / −0.5 wrong (the executor decides)."""
    reading = read_response(task_type, Role.SOLVE, row["text"])
    if not reading.format_ok or reading.extracted is None:
        return -1.0
    context, answer = row["context"], reading.extracted
    if isinstance(answer, DeductionSolution):
        right = executor.check_deduction(context["output"], answer.output).correct
    elif isinstance(answer, AbductionSolution):
        right = executor.check_abduction(context["program"], context["output"], answer.input).correct
    else:
        assert isinstance(answer, InductionSolution)
        split = len(context["inputs"]) // 2
        right = executor.check_induction(answer.program, context["inputs"][split:],
                                         context["outputs"][split:]).correct
    return 1.0 if right else -0.5


def instruction_of(task_type: TaskType, context: dict[str, Any]) -> str:
    """The solver prompt the corpus row answered (tests/data/model_text/sample_corpus.py builds the same)."""
    if task_type is TaskType.INDUCTION:
        split = len(context["inputs"]) // 2
        return induction_solver_prompt(list(zip(context["inputs"][:split], context["outputs"][:split])),
                                       context["message"])
    return solver_prompt(task_type, ReferenceTriplet(context["program"], context["input"], context["output"]))


def solver_episodes(rows: list[dict[str, Any]], codec: PromptCodec, executor: Executor,
                    per_group: int) -> list[Episode]:
    """The first `per_group` solver rows of each task type, as rewarded episodes (a group whose rewards are all
    equal gets no advantage: its episodes then only add entropy and KL terms)."""
    episodes: list[Episode] = []
    for task_type in TaskType:
        members = [row for row in rows if parse_kind(row["kind"]) == (task_type, Role.SOLVE)][:per_group]
        for index, row in enumerate(members):
            episodes.append(Episode(
                id=f"{task_type.value}-{index}", run_id="update-size", step=0, task_type=task_type, role=Role.SOLVE,
                prompt_ids=codec.prompt_ids(instruction_of(task_type, row["context"])),
                response_ids=codec.encode(row["text"]),
                reward=solver_reward(executor, task_type, row), policy_version=0, text=row["text"]))
    return episodes


@torch.no_grad()
def response_logprobs(trainer: Any, episodes: list[Episode]) -> list[torch.Tensor]:
    """Per episode, log π(token) of each response token under the trainer's current weights."""
    out: list[torch.Tensor] = [torch.empty(0)] * len(episodes)
    for mb in trainer.micro_batches(episodes):
        logprobs, _ = logprobs_and_entropy(trainer.forward_module, mb.to(trainer.device), with_entropy=False)
        for row, index in enumerate(mb.episode_index.tolist()):
            out[index] = logprobs[row][mb.response_mask[row].to(logprobs.device)].float().cpu()
    return out


def kl_k3(before: list[torch.Tensor], after: list[torch.Tensor]) -> float:
    """KL(π_before ‖ π_after) per response token, the k3 estimate on tokens π_before (the base model) sampled:
    mean of r − 1 − log r with r = π_after / π_before. Exact in expectation for the first update only; later updates
    measure against tokens an earlier policy sampled (still a fair size of the move)."""
    log_ratio = torch.cat([a - b for a, b in zip(after, before)])
    return float((log_ratio.exp() - 1 - log_ratio).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--per-group", type=int, default=4, help="solver episodes per task type")
    parser.add_argument("--updates", type=int, default=2)
    parser.add_argument("--config", action="append", default=None,
                        help="`full:LR` or `loraR:LR` (e.g. lora16:1e-4); repeatable")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    configs = args.config or ["full:1e-6", "lora16:1e-4"]
    rows = [json.loads(line) for line in args.corpus.read_text().splitlines() if line.strip()]
    model_dir = resolve_model(args.model)
    codec = PromptCodec.from_model_dir(model_dir)
    with Executor(workers=2) as executor:
        episodes = solver_episodes(rows, codec, executor, args.per_group)
    rewards = {t.value: [e.reward for e in episodes if e.task_type is t] for t in TaskType}
    tokens = sum(len(e.prompt_ids) + len(e.response_ids) for e in episodes)
    print(f"{len(episodes)} solver episodes ({tokens} tokens); rewards per type: {json.dumps(rewards)}")
    print("| config | update | KL(before ‖ after) per token | grad norm | Δ mean log p, adv > 0 | "
          "Δ mean log p, adv < 0 | gap | s |")
    print("|---|---|---|---|---|---|---|---|")
    for config in configs:
        kind, _, lr = config.partition(":")
        rank = int(kind[4:]) if kind.startswith("lora") else 0
        settings = Settings(device="cpu", learning_rate=float(lr), lora_rank=rank, batch_size=args.per_group,
                            micro_batch_size=2, micro_batch_tokens=4096, gradient_checkpointing=True,
                            run_root=Path("/tmp/azr-update-size"), **FULL_UPDATE)
        loaded = fresh_trainer(model_dir, settings.trainer)
        trainer = loaded.trainer
        advantages = trainer.advantages(episodes).tolist()
        base = response_logprobs(trainer, episodes)
        previous = base
        for update in range(1, args.updates + 1):
            began = time.perf_counter()
            report = trainer.update(episodes)
            seconds = time.perf_counter() - began
            now = response_logprobs(trainer, episodes)
            moved = [float(a.mean() - b.mean()) for a, b in zip(now, base)]  # since the base weights
            up = [m for m, adv in zip(moved, advantages) if adv > 0]
            down = [m for m, adv in zip(moved, advantages) if adv < 0]
            mean_up, mean_down = (fmean(up) if up else 0.0), (fmean(down) if down else 0.0)
            print(f"| {config} | {update} | {kl_k3(previous, now):.2e} | {report.grad_norm:.3f} | {mean_up:+.4f} | "
                  f"{mean_down:+.4f} | {mean_up - mean_down:+.4f} | {seconds:.0f} |", flush=True)
            previous = now
        del loaded, trainer


if __name__ == "__main__":
    main()
