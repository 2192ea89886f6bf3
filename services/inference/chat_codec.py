"""Prompt text -> token ids, and token ids -> text, for one model's tokenizer.

Shared by the local engine and the SGLang client: the client tokenizes here with the same tokenizer files the
server loads, so the ids it sends are exactly the ids the server would have made from the text.

- Instruct models (their tokenizer has a chat template) get `r1_chat_messages(instruction)` (R1 instruction as the
  system message, the task as the user message) rendered by their template with the assistant turn opened and
  begun with `<think>`, as Fig 33's template begins the base model's answer: without it Qwen2.5-Coder-Instruct
  answers in free prose and no response is well formed (0 of 8 measured); the parser accepts a response that
  starts inside the think block.
- Base models (no chat template) get `render_r1_prompt(instruction)` (paper Fig 33) as plain text, which already
  ends in "Assistant: <think>".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from services.algorithm.prompts import r1_chat_messages, render_r1_prompt
from services.algorithm.response_format import THINK_OPEN

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PromptForm = Literal["chat", "plain"]


class PromptCodec:
    """Turns task instructions into prompt token ids and token ids back into text for one tokenizer."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        """Wrap a loaded `transformers` tokenizer (fast or slow)."""
        self.tokenizer = tokenizer

    @classmethod
    def from_model_dir(cls, model_dir: str | Path) -> PromptCodec:
        """Load the tokenizer saved in an HF model directory (local files only: nothing is downloaded)."""
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True))

    @property
    def form(self) -> PromptForm:
        """`chat` when the tokenizer carries a chat template (an instruct model), else `plain` (a base model)."""
        return "chat" if getattr(self.tokenizer, "chat_template", None) else "plain"

    def prompt_text(self, instruction: str) -> str:
        """The full prompt text the model sees for a task instruction (chat template applied when there is one)."""
        if self.form == "chat":
            opened = self.tokenizer.apply_chat_template(
                r1_chat_messages(instruction), tokenize=False, add_generation_prompt=True)
            assert isinstance(opened, str)  # tokenize=False: the rendered text
            return opened + THINK_OPEN
        return render_r1_prompt(instruction)

    def prompt_ids(self, instruction: str) -> list[int]:
        """Token ids of `prompt_text(instruction)`; the template already holds any special tokens, so none are
        added (a BOS added twice would shift the distribution)."""
        return self.encode(self.prompt_text(instruction))

    def encode(self, text: str) -> list[int]:
        """Token ids of raw text, without adding special tokens."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of token ids with special tokens (EOS, chat markers, padding) dropped."""
        text = self.tokenizer.decode(list(token_ids), skip_special_tokens=True)
        assert isinstance(text, str)  # one sequence of ids: one text
        return text

    def eos_token_ids(self) -> set[int]:
        """Ids that end a sample: the tokenizer's EOS token (the model's generation config may add more)."""
        eos = getattr(self.tokenizer, "eos_token_id", None)
        return {int(eos)} if eos is not None else set()

    def pad_token_id(self) -> int:
        """The id used for left padding (the pad token, else EOS, else 0); padded positions are masked anyway."""
        for name in ("pad_token_id", "eos_token_id"):
            value = getattr(self.tokenizer, name, None)
            if value is not None:
                return int(value)
        return 0
