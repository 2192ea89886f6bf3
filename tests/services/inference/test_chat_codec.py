"""Prompt assembly per model kind: instruct models through their chat template, base models as plain R1 text."""

from __future__ import annotations

from pathlib import Path

from services.algorithm.prompts import R1_SYSTEM_INSTRUCTION, render_r1_prompt
from services.inference.chat_codec import PromptCodec

INSTRUCTION = "Predict the output of f('abc') where def f(s): return s[::-1]"


def test_instruct_model_gets_its_chat_template(tiny_dir: Path) -> None:
    codec = PromptCodec.from_model_dir(tiny_dir)
    assert codec.form == "chat"
    text = codec.prompt_text(INSTRUCTION)
    assert text == (f"<|im_start|>system\n{R1_SYSTEM_INSTRUCTION}<|im_end|>\n"
                    f"<|im_start|>user\n{INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n<think>")
    ids = codec.prompt_ids(INSTRUCTION)
    assert ids == codec.encode(text)
    im_start = codec.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert ids.count(im_start) == 3  # markers are single special tokens, not spelled out
    assert codec.decode(ids).startswith("system\n")  # special tokens dropped on decode


def test_base_model_gets_the_plain_r1_text(tiny_dir: Path) -> None:
    codec = PromptCodec.from_model_dir(tiny_dir)
    codec.tokenizer.chat_template = None  # the same tokenizer without a template is a base model's
    assert codec.form == "plain"
    assert codec.prompt_text(INSTRUCTION) == render_r1_prompt(INSTRUCTION)
    assert codec.prompt_text(INSTRUCTION).endswith("Assistant: <think>")
    assert codec.decode(codec.prompt_ids(INSTRUCTION)) == render_r1_prompt(INSTRUCTION)


def test_eos_and_pad_ids(tiny_dir: Path) -> None:
    codec = PromptCodec.from_model_dir(tiny_dir)
    assert codec.eos_token_ids() == {codec.tokenizer.convert_tokens_to_ids("<|im_end|>")}
    assert codec.pad_token_id() == codec.tokenizer.convert_tokens_to_ids("<|endoftext|>")
