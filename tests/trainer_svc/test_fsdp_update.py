"""The FSDP trainer under a real `torchrun --nproc_per_node 2` (gloo, CPU) against the one-process trainer.

Same batches, same settings: the 2-rank update and the one-process update must produce the same weights and the same
AdamW moments (float summation order is the only difference), including after a restore from the 2-rank checkpoint;
the checkpoint is an HF directory transformers loads, and the one-process trainer resumes from it too.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from process_groups import run_process_group
from safetensors.torch import load_file
from trainer_episodes import six_group_batch
from transformers import AutoModelForCausalLM, AutoTokenizer

from services.records import Episode
from services.settings import Settings
from trainer_svc.batching import collate
from trainer_svc.checkpoints import load_trainer_state
from trainer_svc.optimizer_layout import BY_NAME, index_to_name, parameter_names
from trainer_svc.policy_forward import logprobs_and_entropy
from trainer_svc.resume import fresh_trainer, restore_trainer

SCRIPT = Path(__file__).with_name("fsdp_update_script.py")
WEIGHT_ATOL = 1e-6
NOISE_DRIVEN = "self_attn.k_proj.bias"
NOISE_DRIVEN_ATOL = 1e-5
"""The key projection's bias has an exactly zero true gradient (softmax is invariant to a shift shared by all keys
of a query), so its computed gradient is rounding noise, different for each summation order, and Adam scales noise
up to steps of size lr: after two updates it differs by ~1e-6 between 1 and 2 ranks. Every other tensor is held to
WEIGHT_ATOL (they differ by ~1e-7)."""
NORM_RTOL = 1e-4
"""The gradients themselves come out bitwise equal here, but torch's fp32 `vector_norm` on CPU is accurate only to
~2e-5 relative on the 87k-element embedding gradient (checked against float64), and the sharded norm (a norm per
shard, then combined) rounds differently from the one-process norm: the clip coefficient, hence the grad norm and
the AdamW moments, agree to ~1e-5 relative. Adam's step is scale-invariant, so the weights still agree to 1e-7."""
SETTINGS = {"device": "cpu", "learning_rate": 1e-3, "weight_decay": 0.01, "entropy_coef": 0.001,
            "micro_batch_size": 4, "ppo_epochs": 2, "grad_clip": 1.0, "trainer_bf16_cpu": False}
"""Two PPO epochs (the second sees ratios ≠ 1 and clipping), a grad clip the tiny model's norm exceeds, weight decay
and the entropy bonus: every term of the update is exercised. float32: the comparisons are to 1e-6."""


def with_behaviour_logprobs(batch: list[Episode], tiny_dir: Path, settings: Settings) -> list[Episode]:
    """Every other episode gets behaviour logprobs = current logprobs + a fixed offset pattern (ratios ≠ 1 from the
    first epoch, some outside the clip range); the rest keep None (filled in by the update)."""
    reference = fresh_trainer(tiny_dir, settings.trainer).trainer
    out = []
    for n, ep in enumerate(batch):
        if n % 2:
            out.append(ep)
            continue
        mb = collate([ep], torch.zeros(1), [0], reference.pad_id)
        with torch.no_grad():
            logprobs, _ = logprobs_and_entropy(reference.model, mb, with_entropy=False)
        offsets = [0.3 * ((k % 3) - 1) for k in range(len(ep.response_ids))]
        out.append(ep.model_copy(update={"behaviour_logprobs": [float(v) + o for v, o in
                                                                 zip(logprobs[0].tolist(), offsets)]}))
    return out


def write_batch(path: Path, batch: list[Episode]) -> Path:
    path.write_text("".join(e.model_dump_json() + "\n" for e in batch))
    return path


def run_torchrun(nproc: int, tiny_dir: Path, run_dir: Path, batches: list[Path], report: Path,
                 settings: dict | None = None) -> dict:
    chosen = SETTINGS if settings is None else settings
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               str(SCRIPT), "--model", str(tiny_dir), "--run-dir", str(run_dir),
               "--settings-json", json.dumps({**chosen, "run_root": str(run_dir.parent), "run_id": run_dir.name}),
               "--report", str(report)]
    for batch in batches:
        command += ["--batch", str(batch)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = run_process_group(command, timeout=400, env=env)  # a timeout ends the ranks too
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    return json.loads(report.read_text())


def assert_same_weights(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], what: str) -> None:
    assert actual and set(actual) <= set(expected)
    for name, tensor in actual.items():
        atol = NOISE_DRIVEN_ATOL if NOISE_DRIVEN in name else WEIGHT_ATOL
        torch.testing.assert_close(tensor, expected[name], atol=atol, rtol=0, msg=f"{what}: {name}")


def assert_reports_match(fsdp: dict, single: dict) -> None:
    for key in ("episodes", "micro_batches", "tokens", "padded_tokens", "ppo_epochs", "step"):
        assert fsdp[key] == single[key], key
    for key in ("loss", "pg_loss", "entropy", "clip_fraction", "approx_kl", "ratio_max"):
        assert fsdp[key] == pytest.approx(single[key], rel=1e-5, abs=1e-7), key
    assert fsdp["grad_norm"] == pytest.approx(single["grad_norm"], rel=NORM_RTOL)


@pytest.mark.slow
def test_two_rank_fsdp_update_equals_the_one_process_update(tiny_dir: Path, tmp_path: Path) -> None:
    settings = Settings(**SETTINGS, run_root=tmp_path / "runs", run_id="single")
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    # 12 episodes in 3 micro-batches (rank 1 runs an idle pass), then 18 in 5 (again uneven)
    batch1 = with_behaviour_logprobs(six_group_batch(tokenizer, 2), tiny_dir, settings)
    batch2 = with_behaviour_logprobs(six_group_batch(tokenizer, 3, policy_version=1), tiny_dir, settings)

    single = fresh_trainer(tiny_dir, settings.trainer)
    single_reports = [single.trainer.update(batch1).model_dump(mode="json")]
    after1 = {k: v.detach().clone() for k, v in single.trainer.model.state_dict().items()}
    moments1 = index_to_name(copy.deepcopy(single.trainer.optimizer.state_dict()),  # the live tensors move on
                             parameter_names(single.trainer.model, single.trainer.optimizer))
    single_reports.append(single.trainer.update(batch2).model_dump(mode="json"))
    after2 = {k: v.detach().clone() for k, v in single.trainer.model.state_dict().items()}

    run_dir = tmp_path / "runs" / "fsdp"
    out = run_torchrun(2, tiny_dir, run_dir,
                       [write_batch(tmp_path / "b1.jsonl", batch1), write_batch(tmp_path / "b2.jsonl", batch2)],
                       tmp_path / "report.json")
    assert out["world_size"] == 2
    v1, v2 = run_dir / "checkpoints" / "v000001", run_dir / "checkpoints" / "v000002"
    assert_same_weights(load_file(v1 / "model.safetensors"), after1, "v1")
    # the second update ran on ranks restored from v1, so this also checks the optimizer state's round trip
    assert_same_weights(load_file(v2 / "model.safetensors"), after2, "v2")
    for fsdp_report, single_report in zip(out["reports"], single_reports, strict=True):
        assert_reports_match(fsdp_report, single_report)
    assert out["reports"][0]["grad_norm"] > SETTINGS["grad_clip"], "the clip must have acted for this to test it"

    state = load_trainer_state(v1)
    assert state.optimizer_layout == BY_NAME and (state.step, state.policy_version) == (1, 1)
    assert sorted(state.applied_episode_ids) == sorted(e.id for e in batch1)
    assert set(state.optimizer["state"]) == set(moments1["state"])
    for name, moments in moments1["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            scale = float(moments[key].abs().max())  # near-zero entries carry the gradients' rounding noise
            torch.testing.assert_close(state.optimizer["state"][name][key], moments[key], rtol=2 * NORM_RTOL,
                                       atol=2 * NORM_RTOL * scale,
                                       msg=lambda m, key=key, name=name: f"{key} of {name}: {m}")

    model = AutoModelForCausalLM.from_pretrained(v1, local_files_only=True)  # what an inference server loads
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert_same_weights(model.state_dict(), after1, "v1 via transformers")

    # the one-process trainer resumes from the 2-rank checkpoint (by-name optimizer state) and lands on the same v2
    other_run = tmp_path / "runs" / "resumed"
    shutil.copytree(v1, other_run / "checkpoints" / "v000001")
    resumed = restore_trainer(other_run, settings.trainer)
    assert resumed is not None and resumed.trainer.step == 1
    resumed.trainer.update(batch2)
    assert_same_weights(resumed.trainer.model.state_dict(), after2, "one process resumed from the 2-rank v1")


@pytest.mark.slow
def test_activation_checkpointing_under_fsdp_recomputes_every_layer_and_keeps_the_update(tiny_dir: Path,
                                                                                        tmp_path: Path) -> None:
    """Two ranks with every decoder layer checkpointed before sharding: each layer's insides run twice per pass
    (forward, then the recomputation in backward, on parameters FSDP gathered again), and the weights equal the
    one-process trainer's without checkpointing."""
    chosen = {**SETTINGS, "ppo_epochs": 1}
    settings = Settings(**chosen, run_root=tmp_path / "runs", run_id="single")
    batch = six_group_batch(AutoTokenizer.from_pretrained(tiny_dir), 2)
    single = fresh_trainer(tiny_dir, settings.trainer)
    single.trainer.update(batch)
    expected = {k: v.detach().clone() for k, v in single.trainer.model.state_dict().items()}

    run_dir = tmp_path / "runs" / "fsdp-ckpt"
    out = run_torchrun(2, tiny_dir, run_dir, [write_batch(tmp_path / "b.jsonl", batch)], tmp_path / "report.json",
                       settings={**chosen, "gradient_checkpointing": True})
    assert out["layer_calls"] > 0 and out["mlp_calls"] == 2 * out["layer_calls"], out
    assert_same_weights(load_file(run_dir / "checkpoints" / "v000001" / "model.safetensors"), expected, "v1")


@pytest.mark.slow
def test_prompt_without_gradient_under_fsdp_equals_the_one_process_update(tiny_dir: Path, tmp_path: Path) -> None:
    """`prompt_gradient = false` on two ranks, with every layer checkpointed (each decoder layer's FSDP unit then
    runs forward three times a micro-batch: the prompt without autograd, the tail, the tail's recomputation): the
    weights equal the one-process trainer's with the same setting, and differ from the update with the prompt's
    gradient, so the setting reached the ranks."""
    chosen = {**SETTINGS, "ppo_epochs": 1, "prompt_gradient": False}
    batch = six_group_batch(AutoTokenizer.from_pretrained(tiny_dir), 2)
    updated = {}
    for prompt_gradient in (False, True):
        single = fresh_trainer(tiny_dir, Settings(**{**chosen, "prompt_gradient": prompt_gradient},
                                                  run_root=tmp_path / "runs", run_id="single").trainer)
        single.trainer.update(batch)
        updated[prompt_gradient] = {k: v.detach().clone() for k, v in single.trainer.model.state_dict().items()}

    run_dir = tmp_path / "runs" / "fsdp-frozen-prompt"
    out = run_torchrun(2, tiny_dir, run_dir, [write_batch(tmp_path / "b.jsonl", batch)], tmp_path / "report.json",
                       settings={**chosen, "gradient_checkpointing": True})
    assert out["layer_calls"] > 0, out
    fsdp = load_file(run_dir / "checkpoints" / "v000001" / "model.safetensors")
    assert_same_weights(fsdp, updated[False], "v1, prompt without gradient")
    differences = [float((fsdp[name] - updated[True][name]).abs().max()) for name in fsdp]
    assert max(differences) > 100 * WEIGHT_ATOL, "the prompt's gradient changed nothing: the test would prove nothing"
