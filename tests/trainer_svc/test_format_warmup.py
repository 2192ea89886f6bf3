"""The format warm-up: a supervised pass lowers the response NLL of the well-formed seed proposals, leaves the base
weights alone, and writes a snapshot a run starts from; `azr warmup` does it from the run's settings."""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch
from typer.testing import CliRunner

from azr.cli.main import app
from azr.factory.parts import warmup_plan
from services.algorithm.warmup_examples import warmup_examples
from services.inference.chat_codec import PromptCodec
from services.settings import Settings
from services.settings.profiles import PACKAGED_SEED_FILES
from trainer_svc.format_warmup import (
    WarmupSettings,
    encode_examples,
    response_nll,
    run_warmup,
    write_warmup_snapshot,
)
from trainer_svc.lora import add_adapters
from trainer_svc.resume import fresh_trainer, load_model_and_tokenizer
from trainer_svc.snapshot import snapshot_metadata


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def settings(**extra: object) -> Settings:
    return Settings(lora_rank=4, lora_alpha=8.0, device="cpu", gradient_checkpointing=False,
                    **extra)  # type: ignore[arg-type]


def test_the_pass_lowers_the_response_nll_and_trains_only_the_adapters(tiny_dir: Path, tmp_path: Path) -> None:
    codec = PromptCodec.from_model_dir(tiny_dir)
    made = warmup_examples(rows(PACKAGED_SEED_FILES[0]), rows(PACKAGED_SEED_FILES[1]), per_type=1, references_k=2,
                           num_inputs=10, fits=lambda _: True, rng=random.Random(0))
    encoded = encode_examples(codec, made)
    assert all(e.response_ids[-1] in codec.eos_token_ids() for e in encoded), "each response ends its turn"
    torch.manual_seed(0)  # the adapters' random A
    model, _ = load_model_and_tokenizer(tiny_dir)
    model = add_adapters(model, settings().trainer.lora, tiny_dir)
    base = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    with torch.no_grad():
        before = [float(response_nll(model, e)) for e in encoded]
    report = run_warmup(model, encoded, WarmupSettings(learning_rate=5e-3, epochs=8, examples_per_step=3))
    with torch.no_grad():
        after = [float(response_nll(model, e)) for e in encoded]
    assert len(report.step_losses) == 8 and report.examples == 3
    assert sum(after) < sum(before) - 0.2 and report.last_loss < report.first_loss, (before, after)
    assert all(torch.equal(p, base[n]) for n, p in model.named_parameters() if "lora_" not in n)

    target = write_warmup_snapshot(model, tmp_path / "warm.safetensors", model_name="tiny", report=report)
    header = snapshot_metadata(target)
    assert header["origin"] == "format-warmup" and (header["step"], header["policy_version"]) == (0, 0)
    started = fresh_trainer(tiny_dir, settings(lora_init_adapter=target).trainer)
    assert started.trainer.policy_version == 1 and started.trainer.step == 0  # not the base model's version 0
    with torch.no_grad():
        restored = [float(response_nll(started.trainer.model, e)) for e in encoded]
    assert started.restored
    assert abs(sum(restored) - sum(after)) < 0.05 * sum(after), (restored, after)  # bf16 in the file


def test_the_command_writes_the_snapshot_and_the_examples(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "warmup.safetensors"
    env = {"AZR_LORA_RANK": "4", "AZR_LORA_ALPHA": "8", "AZR_DEVICE": "cpu", "AZR_REFERENCES_K": "2",
           "AZR_GRADIENT_CHECKPOINTING": "false"}
    result = CliRunner().invoke(app, ["warmup", "--model", str(tiny_dir), "--out", str(out), "--per-type", "1"],
                                env=env)
    assert result.exit_code == 0, result.output
    assert "warm-up: response NLL" in result.output and snapshot_metadata(out)["origin"] == "format-warmup"
    written = rows(out.with_name(out.name + ".examples.jsonl"))
    assert [row["task_type"] for row in written] == ["deduction", "abduction", "induction"]

    refused = CliRunner().invoke(app, ["warmup", "--model", str(tiny_dir), "--out", str(out)],
                                 env={**env, "AZR_LORA_RANK": "0"})
    assert refused.exit_code == 2 and "lora_rank > 0" in refused.output


def test_a_new_run_with_the_switch_warms_up_before_its_first_step(tiny_dir: Path, tmp_path: Path) -> None:
    from trainer_svc.format_warmup import SNAPSHOT_FILE
    from trainer_svc.resume import load_or_restore

    switched = settings(format_warmup_per_type=1, format_warmup_epochs=1, references_k=2)
    loaded = load_or_restore(tmp_path / "run", tiny_dir, switched.trainer, warmup=warmup_plan(switched),
                             say=lambda _: None)
    assert loaded.restored, "the warmed-up adapters are pushed to the engines before step 1"
    assert loaded.trainer.policy_version == 1, "version 0 is the base model the engines start with"
    assert snapshot_metadata(tmp_path / "run" / SNAPSHOT_FILE)["origin"] == "format-warmup"
    assert len(rows(tmp_path / "run" / f"{SNAPSHOT_FILE}.examples.jsonl")) == 3
    assert any(p.abs().sum() > 0 for n, p in loaded.trainer.model.named_parameters() if "lora_B" in n)

    said: list[str] = []
    again = load_or_restore(tmp_path / "run", tiny_dir, switched.trainer,  # stopped before a checkpoint
                            warmup=warmup_plan(switched), say=said.append)
    assert any("the adapters of" in line for line in said) and not any("response NLL" in line for line in said)
    for (name, first), (_, second) in zip(loaded.trainer.model.named_parameters(),
                                          again.trainer.model.named_parameters()):
        assert torch.allclose(first, second, atol=1e-2), name

    unswitched = settings()
    plain = load_or_restore(tmp_path / "plain", tiny_dir, unswitched.trainer,
                            warmup=warmup_plan(unswitched), say=lambda _: None)
    assert not plain.restored and not (tmp_path / "plain" / SNAPSHOT_FILE).exists()
    assert all(p.abs().sum() == 0 for n, p in plain.trainer.model.named_parameters() if "lora_B" in n)


def test_the_cached_prompt_gives_the_full_forward_s_value(tiny_dir: Path) -> None:
    from trainer_svc.format_warmup import EncodedExample

    torch.manual_seed(1)
    model, _ = load_model_and_tokenizer(tiny_dir)
    model = add_adapters(model, settings().trainer.lora, tiny_dir)
    with torch.no_grad():
        for parameter in (p for n, p in model.named_parameters() if "lora_B" in n):
            parameter.normal_(0, 0.05)  # adapters that change the output
    example = EncodedExample(prompt_ids=list(range(5, 45)), response_ids=[7, 9, 11, 13, 2])
    full = model(input_ids=torch.tensor([example.prompt_ids + example.response_ids])).logits[0].float()
    expected = torch.nn.functional.cross_entropy(full[len(example.prompt_ids) - 1:-1],
                                                 torch.tensor(example.response_ids))
    cached = response_nll(model, example)
    torch.testing.assert_close(cached, expected, rtol=1e-5, atol=1e-5)
    cached.backward()
    gradients = {n: p.grad.clone() for n, p in model.named_parameters() if "lora_" in n and p.grad is not None}
    assert gradients and any(g.abs().sum() > 0 for g in gradients.values())

    from trainer_svc.activation_checkpointing import checkpoint_decoder_layers

    checkpoint_decoder_layers(model)  # the run's trainer checkpoints its layers: the cached forward must still work
    model.zero_grad(set_to_none=True)
    response_nll(model, example).backward()
    for name, gradient in gradients.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad, gradient, rtol=1e-4, atol=1e-6)
