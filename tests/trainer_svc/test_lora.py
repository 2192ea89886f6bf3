"""LoRA through PEFT (`lora_rank` > 0) on the tiny real model: an update moves only the adapters and follows the
rewards; the checkpoint holds the adapters alone and restores exactly; the pushed weights are the merged policy under
the base model's names and load in the local engine; the multi-rank FSDP trainer refuses LoRA."""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from policy_probes import sequence_logprob, update_on_rewarded_pair
from safetensors.torch import load_file
from trainer_episodes import six_group_batch
from trainer_states import assert_bitwise_equal, trainer_state
from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from azr.cli.main import app
from services.inference.local_engine import LocalEngine
from services.ports import SamplingParams
from services.settings import Settings
from trainer_svc.activation_checkpointing import decoder_layers
from trainer_svc.checkpoints import TRAINER_STATE_FILE
from trainer_svc.distributed_env import RankInfo
from trainer_svc.lora import (
    ADAPTER_CONFIG_FILE,
    ADAPTER_WEIGHTS_FILE,
    BASE_RECORD_FILE,
    lora_config,
    lora_layers,
    merged_state_dict,
    peft_on_transformers5,
    write_merged_model,
)
from trainer_svc.ppo_update import accumulate_gradients
from trainer_svc.resume import (
    build_trainer,
    checkpoint_trainer,
    fresh_trainer,
    load_model_and_tokenizer,
    restore_trainer,
)
from trainer_svc.weight_export import write_serving_weights

CPU = torch.device("cpu")


@pytest.fixture
def lora_settings(cpu_settings: Settings) -> Settings:
    return cpu_settings.with_values(lora_rank=4, lora_alpha=8.0, learning_rate=1e-2)


def lora_trainer(tiny_dir: Path, settings: Settings, seed: int = 0):
    torch.manual_seed(seed)  # the adapters' A matrices are drawn at random
    return fresh_trainer(tiny_dir, settings.trainer)


def tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in state.items()}


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def base_names(tiny_dir: Path) -> set[str]:
    model, _ = load_model_and_tokenizer(tiny_dir)
    return set(model.state_dict())


# ------------------------------------------------------------------------------------------------ (a) the update

def test_a_lora_update_trains_only_the_adapters_and_follows_the_rewards(tiny_dir: Path,
                                                                        lora_settings: Settings) -> None:
    loaded = lora_trainer(tiny_dir, lora_settings)
    model, optimizer = loaded.trainer.model, loaded.trainer.optimizer
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert optimized == {id(p) for n, p in model.named_parameters() if n in trainable}, "AdamW over adapters only"
    assert len(lora_layers(model)) == 7 * len(decoder_layers(model))  # every projection of every decoder layer
    frozen_before = tensors({n: p for n, p in model.named_parameters() if n not in trainable})
    adapters_before = tensors({n: p for n, p in model.named_parameters() if n in trainable})

    update_on_rewarded_pair(loaded.trainer, loaded.tokenizer)  # +1 response gains log-prob, −0.5 one loses

    for name, tensor in model.named_parameters():
        if name in trainable:
            continue
        assert torch.equal(tensor, frozen_before[name]), f"base weight {name} moved"
    moved = [n for n in trainable if not torch.equal(dict(model.named_parameters())[n], adapters_before[n])]
    assert any(".lora_B." in n for n in moved), "the adapters' B matrices must move"


def test_activation_checkpointing_recomputes_through_the_adapters_with_the_same_gradients(
        tiny_dir: Path, lora_settings: Settings) -> None:
    plain_loaded = lora_trainer(tiny_dir, lora_settings.with_values(gradient_checkpointing=False))
    plain = plain_loaded.trainer
    assert not any(getattr(layer.forward, "azr_checkpointed", False) for layer in decoder_layers(plain.model))
    checkpointed = lora_trainer(tiny_dir, lora_settings.with_values(gradient_checkpointing=True)).trainer
    assert all(getattr(layer.forward, "azr_checkpointed", False) for layer in decoder_layers(checkpointed.model))
    batch = six_group_batch(plain_loaded.tokenizer, 2)
    grads, calls = {}, {}
    for label, trainer in (("plain", plain), ("checkpointed", checkpointed)):
        with torch.no_grad():  # B = 0 at init gives A no gradient: make both adapters non-zero, alike
            for name, param in trainer.model.named_parameters():
                if ".lora_B." in name:
                    param.copy_(torch.linspace(-0.05, 0.05, param.numel()).reshape(param.shape))
        counted = {"n": 0}
        probe = next(iter(lora_layers(trainer.model).values())).lora_A["default"]
        handle = probe.register_forward_hook(lambda *_, counted=counted: counted.__setitem__("n", counted["n"] + 1))
        trainer.model.zero_grad(set_to_none=True)
        accumulate_gradients(trainer.model, trainer.micro_batches(batch), entropy_coef=0.0, device=CPU)
        handle.remove()
        calls[label] = counted["n"]
        grads[label] = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    assert calls["checkpointed"] == 2 * calls["plain"] > 0, "each checkpointed layer reruns its adapters in backward"
    assert grads["plain"].keys() == grads["checkpointed"].keys()
    assert any(".lora_A." in n for n in grads["plain"]) and all("lora_" in n for n in grads["plain"])
    for name, grad in grads["plain"].items():
        torch.testing.assert_close(grads["checkpointed"][name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_lora_dropout_runs_only_in_the_adapters(tiny_dir: Path, lora_settings: Settings) -> None:
    model = lora_trainer(tiny_dir, lora_settings.with_values(lora_dropout=0.5)).trainer.model
    layers = lora_layers(model).values()
    assert all(isinstance(layer.lora_dropout["default"], torch.nn.Dropout) for layer in layers)
    in_train_mode = {id(m) for m in model.modules() if m.training}
    assert in_train_mode == {id(m) for layer in layers for m in (layer.lora_dropout, layer.lora_dropout["default"])}


# ------------------------------------------------------------------------------------------------ (b) checkpoints

def test_the_checkpoint_holds_adapters_only_and_is_a_fraction_of_the_full_one(tiny_dir: Path, cpu_settings: Settings,
                                                                              lora_settings: Settings,
                                                                              tmp_path: Path) -> None:
    sizes = {}
    for label, settings in (("full", cpu_settings), ("lora", lora_settings)):
        loaded = lora_trainer(tiny_dir, settings)
        loaded.trainer.update(six_group_batch(loaded.tokenizer, 1))
        path = checkpoint_trainer(loaded, tmp_path / label, settings.trainer, settings_record=settings.resolved(),
                                  policy_version=1)
        sizes[label] = dir_bytes(path)
        if label == "lora":
            assert not list(path.glob("model*.safetensors")) and not (path / "config.json").exists()
            assert {ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, BASE_RECORD_FILE, TRAINER_STATE_FILE} <= {
                p.name for p in path.iterdir()}
            trainable = {n for n, p in loaded.trainer.model.named_parameters() if p.requires_grad}
            assert len(load_file(path / ADAPTER_WEIGHTS_FILE)) == len(trainable)
            assert json.loads((path / BASE_RECORD_FILE).read_text())["base_model_dir"] == str(tiny_dir)
            # a PEFT adapter directory: PeftModel loads it on the base and computes what the trainer computes
            from peft import PeftModel

            base, _ = load_model_and_tokenizer(tiny_dir)
            with peft_on_transformers5():
                peft_model = PeftModel.from_pretrained(base, path).eval()
            ids = torch.tensor([loaded.tokenizer("def f(x):\n    return x")["input_ids"]])
            with torch.no_grad():
                torch.testing.assert_close(peft_model(input_ids=ids).logits,
                                           loaded.trainer.model(input_ids=ids).logits)
    assert sizes["lora"] < sizes["full"] / 5, sizes


def test_restore_from_adapters_is_bitwise_identical_to_continuing(tiny_dir: Path, lora_settings: Settings,
                                                                  tmp_path: Path) -> None:
    settings = lora_settings.with_values(weight_decay=0.01, entropy_coef=0.001,
                                                gradient_checkpointing=True)
    run_dir = tmp_path / "run"
    first = lora_trainer(tiny_dir, settings)
    batch1 = six_group_batch(first.tokenizer, 2, policy_version=0)
    batch2 = six_group_batch(first.tokenizer, 3, policy_version=1)
    first.trainer.update(batch1)
    checkpoint = checkpoint_trainer(first, run_dir, settings.trainer, settings_record=settings.resolved(),
                                    policy_version=1)
    rng_at_save = torch.random.get_rng_state()
    first.trainer.update(batch2)
    continued = trainer_state(first)

    torch.manual_seed(12345)  # disturb every generator (also what the restore's fresh adapters are drawn from)
    random.seed(12345)
    np.random.seed(12345)
    restored = restore_trainer(run_dir, settings.trainer)
    assert restored is not None and restored.restored
    assert (restored.trainer.step, restored.trainer.policy_version) == (1, 1)
    assert restored.checkpoint == checkpoint and restored.source == tiny_dir, "the base is what a server loads"
    assert torch.equal(torch.random.get_rng_state(), rng_at_save)
    restored.trainer.update(batch2)
    assert_bitwise_equal(trainer_state(restored), continued)
    assert restored.trainer.step == first.trainer.step == 2


def test_restore_refuses_another_base_model_or_other_lora_settings(tiny_dir: Path, lora_settings: Settings,
                                                                   cpu_settings: Settings, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    loaded = lora_trainer(tiny_dir, lora_settings)
    checkpoint_trainer(loaded, run_dir, lora_settings.trainer, settings_record=lora_settings.resolved(),
                       policy_version=1)
    other = tmp_path / "other-base"  # same architecture, config and file size; other weights
    shutil.copytree(tiny_dir, other)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32, local_files_only=True)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(1e-3)
    model.save_pretrained(other)
    assert (other / "model.safetensors").stat().st_size == (tiny_dir / "model.safetensors").stat().st_size
    with pytest.raises(ValueError, match="another model"):
        restore_trainer(run_dir, lora_settings.trainer, model_dir=other)
    with pytest.raises(ValueError, match="lora_rank=0"):
        restore_trainer(run_dir, cpu_settings.trainer)
    with pytest.raises(ValueError, match="'r': 4"):
        restore_trainer(run_dir, lora_settings.with_values(lora_rank=8).trainer)
    # the right base still restores
    assert restore_trainer(run_dir, lora_settings.trainer, model_dir=tiny_dir) is not None
    full_run = tmp_path / "full"
    checkpoint_trainer(fresh_trainer(tiny_dir, cpu_settings.trainer), full_run, cpu_settings.trainer,
                       settings_record=cpu_settings.resolved(), policy_version=1)
    with pytest.raises(ValueError, match="holds full weights"):
        restore_trainer(full_run, lora_settings.trainer)


# ------------------------------------------------------------------------------------------------ (c) the push

def test_the_push_is_the_merged_policy_under_the_base_names_and_the_engine_serves_it(tiny_dir: Path,
                                                                                     lora_settings: Settings,
                                                                                     tmp_path: Path) -> None:
    loaded = lora_trainer(tiny_dir, lora_settings)
    loaded.trainer.update(six_group_batch(loaded.tokenizer, 2))
    model = loaded.trainer.model
    training_before = tensors(model.state_dict())
    expected = peft_merged(tiny_dir, lora_settings, model)
    base, _ = load_model_and_tokenizer(tiny_dir)
    base_state = base.state_dict()

    pushed = write_serving_weights(tmp_path / "run", model, policy_version=1)
    written = load_file(pushed / "model.safetensors")
    names = base_names(tiny_dir)
    assert set(written) <= names and not any("lora" in k or "base_layer" in k for k in written)
    assert names - set(written) <= {"lm_head.weight"}, "tied head dropped as for the base model, nothing else"
    assert json.loads((pushed / "config.json").read_text())["dtype"] == "bfloat16"
    changed = 0
    for name, tensor in written.items():
        assert tensor.dtype == torch.bfloat16
        assert torch.equal(tensor, expected[name].to(torch.bfloat16)), f"{name} is not PEFT's merged value"
        changed += not torch.equal(tensor, base_state[name].to(torch.bfloat16))
    assert changed >= len(lora_layers(model)) // 2, "the adapters' update must be in the pushed weights"
    assert_bitwise_equal(tensors(model.state_dict()), training_before)  # exported beside, not merged into

    engine = LocalEngine(tiny_dir, device="cpu")
    good = six_group_batch(loaded.tokenizer, 1)[0]
    base_lp = engine.forward_logprobs(good.prompt_ids, good.response_ids)
    engine.update_weights(str(pushed), 1)
    served_lp = engine.forward_logprobs(good.prompt_ids, good.response_ids)
    assert engine.weight_version() == "1" and served_lp != pytest.approx(base_lp, abs=1e-6)
    assert sum(served_lp) == pytest.approx(sequence_logprob(loaded.trainer, good), abs=0.05)  # bf16 vs fp32
    out = engine.generate([good.prompt_ids], SamplingParams(max_new_tokens=6, temperature=0))[0][0]
    assert len(out.output_ids) >= 1


def peft_merged(tiny_dir: Path, settings: Settings, model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """PEFT's own merge (`merge_and_unload`) of ``model``'s adapters, on a separately built PeftModel."""
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

    base, _ = load_model_and_tokenizer(tiny_dir)
    with peft_on_transformers5():
        reference = get_peft_model(base, lora_config(settings.trainer.lora))
    adapters = {f"base_model.model.{k}": v for k, v in get_peft_model_state_dict(model).items()}
    assert not set_peft_model_state_dict(reference, adapters).unexpected_keys
    return dict(reference.merge_and_unload().state_dict())


def test_merged_state_dict_equals_the_base_when_the_adapters_are_fresh(tiny_dir: Path,
                                                                       lora_settings: Settings) -> None:
    model = lora_trainer(tiny_dir, lora_settings).trainer.model  # B = 0: merged is the base exactly
    base, _ = load_model_and_tokenizer(tiny_dir)
    merged = merged_state_dict(model)
    assert merged.keys() == base.state_dict().keys()
    for name, tensor in base.state_dict().items():
        assert torch.equal(merged[name], tensor), name


def test_a_checkpoint_merges_into_a_plain_model_directory_that_azr_eval_scores(tiny_dir: Path,
                                                                              lora_settings: Settings,
                                                                              tmp_path: Path) -> None:
    loaded = lora_trainer(tiny_dir, lora_settings)
    loaded.trainer.update(six_group_batch(loaded.tokenizer, 2))
    checkpoint = checkpoint_trainer(loaded, tmp_path / "run", lora_settings.trainer,
                                    settings_record=lora_settings.resolved(), policy_version=1)
    merged_dir = write_merged_model(checkpoint, tmp_path / "merged")
    merged, _ = load_model_and_tokenizer(merged_dir)
    expected = merged_state_dict(loaded.trainer.model)
    base_state = load_model_and_tokenizer(tiny_dir)[0].state_dict()
    state = merged.state_dict()
    assert state.keys() == expected.keys()
    for name, tensor in state.items():
        torch.testing.assert_close(tensor, expected[name], rtol=0, atol=1e-6, msg=name)
    assert any(not torch.equal(state[name], base_state[name]) for name in state), "the update is in the merge"

    env = {"AZR_EXECUTOR_WORKERS": "1", "COLUMNS": "250", "AZR_LOCAL_ENGINE": "torch"}
    args = ["eval", "cruxeval", "--model", str(checkpoint), "--limit", "2", "--max-response-tokens", "8",
            "--out", str(tmp_path / "probe.jsonl")]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output
    assert "LoRA adapters; merging them" in result.output and "CRUXEval-O  accuracy" in result.output
    rows = [json.loads(line) for line in (tmp_path / "probe.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {row["checkpoint_version"] for row in rows} == {1}
    if importlib.util.find_spec("llama_cpp") is not None:  # the llama.cpp engine applies the adapters unmerged
        applied = CliRunner().invoke(app, [*args[:-1], str(tmp_path / "applied.jsonl")],
                                     env={**env, "AZR_LOCAL_ENGINE": "llama-cpp"})
        assert applied.exit_code == 0, applied.output
        assert "the llama.cpp engine applies them" in applied.output and "CRUXEval-O  accuracy" in applied.output

    record = json.loads((checkpoint / BASE_RECORD_FILE).read_text())
    record["fingerprint"]["sampled_sha256"] = "0" * 64  # the base moved on: refuse, write nothing
    (checkpoint / BASE_RECORD_FILE).write_text(json.dumps(record))
    args[-1] = str(tmp_path / "refused.jsonl")
    refused = CliRunner().invoke(app, args, env=env)
    assert refused.exit_code == 2 and "is another model" in refused.output, refused.output
    assert not (tmp_path / "refused.jsonl").exists()


# ------------------------------------------------------------------------------------------------ (e) FSDP

def test_the_fsdp_trainer_refuses_lora_by_name(tiny_dir: Path, lora_settings: Settings) -> None:
    model, tokenizer = load_model_and_tokenizer(tiny_dir)
    ranks = RankInfo(rank=0, world_size=2, local_rank=0, device=CPU)
    with pytest.raises(ValueError, match=r"lora_rank=4 \(LoRA\) is not supported by the multi-rank FSDP trainer"):
        build_trainer(model, tokenizer, lora_settings.trainer, ranks, base_dir=tiny_dir)
    assert not lora_layers(model), "refused before any adapter was added"


def test_azr_trainer_under_torchrun_refuses_lora_before_loading(monkeypatch, tmp_path: Path) -> None:
    for name, value in {"AZR_QUEUE_BACKEND": "redis", "AZR_RUN_ROOT": str(tmp_path), "AZR_LORA_RANK": "8",
                        "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["trainer", "--model", "tiny", "--no-push"])
    assert result.exit_code == 2, result.output
    assert "lora_rank=8" in result.output and "AZR_LORA_RANK=0" in result.output
    assert not any(tmp_path.iterdir())
