"""How a model response is read before any task-level parsing: the R1 template (Eq 6's format check) and the answer
text. Pure: no I/O, nothing executed, and no function here raises on any `str`.

The rules are the authors' (their reward manager and `custom_evaluate.py`, as docs/reading-rules.md sets out), so a
response earns the same format verdict and yields the same answer text here as in their trainer:

- The generation. The authors decode prompt + response without special tokens, split the text at "Assistant:" and
  keep the part after the first one, stripped of whitespace and then of quote characters at both ends. Their prompt
  ends with "Assistant: <think>" (Fig 33), so what they read is "<think>" followed by the response, cut before any
  "Assistant:" the response itself writes (a model that goes on to play both sides of a dialogue). Instruct models
  get the same reading: their chat prompt opens the assistant turn with "<think>" (services/inference/chat_codec).
  Special-token texts (`<|im_end|>`, ...) are removed wherever they appear, as a decoder that skips them does.
- Format (`format_ok`): the generation matches `(?s)<think>.*?</think>\\s*<answer>.*?</answer>` from its start:
  somewhere a `</think>` followed by whitespace only and `<answer>`, and a `</answer>` after that. Text after
  `</answer>` and tags mentioned inside the thinking are allowed; an empty thinking or answer is allowed. Tags are
  case-sensitive.
- Answer (`answer`): the text after the LAST `<answer>` up to the next `</answer>` (to the end when none follows),
  stripped; "" when the generation has no `<answer>`. Answers are read whatever the format verdict: a proposal with a
  format error can still be a valid task (it joins its buffer and still earns −1, §3.3.2).
- `format_failure` names why the format check failed, for people and metrics; it never changes a verdict.

Learnability samples (the n solver samples that estimate a proposal's solve rate, Eq 4) are read by
`learnability_answer_text`: the authors take their answer from the decoded response alone, with no split at
"Assistant:" and no quote stripping, and check it whatever its format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ANSWER_CLOSE",
    "ANSWER_OPEN",
    "SPECIAL_TOKEN_TEXTS",
    "SPLITTER",
    "THINK_CLOSE",
    "THINK_OPEN",
    "Generation",
    "ParseFailure",
    "extract_answer",
    "learnability_answer_text",
    "read_generation",
    "remove_special_tokens",
]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"
SPLITTER = "Assistant:"
"""The authors' `reward_fn.splitter`: the generation is what follows the prompt's "Assistant:"."""

SPECIAL_TOKEN_TEXTS: tuple[str, ...] = (
    # Qwen2.5 (and SmolLM2's chat tokens): what its tokenizer marks `special`
    "<|im_end|>", "<|im_start|>", "<|endoftext|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>",
    # Llama 3
    "<|end_of_text|>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
)
"""The texts a decode with `skip_special_tokens=True` drops for the model families we serve, which is what the
authors' reward code decodes with. Added tokens the tokenizer does not mark special stay in the text, as they do
there: Qwen2.5's `<|fim_prefix|>`, `<|fim_middle|>`, `<|fim_suffix|>`, `<|fim_pad|>`, `<|repo_name|>`,
`<|file_sep|>`, `<tool_call>`, and plain `<s>` / `</s>`."""

_FORMAT = re.compile(r"(?s)<think>.*?</think>\s*<answer>.*?</answer>")
_THINK_THEN_ANSWER = re.compile(r"</think>\s*<answer>")


class ParseFailure(StrEnum):
    """Why a response is not well formed (Eq 6) or yields no task / answer. Values are stored and counted."""

    NO_THINK = "no_think"  # no `</think>` (often: cut off at the token limit)
    NO_ANSWER = "no_answer"  # `</think>` but no `<answer>` anywhere
    MALFORMED_TAGS = "malformed_tags"  # `<answer>` exists but never right after a `</think>` (text between them)
    UNCLOSED_ANSWER = "unclosed_answer"  # `</think>` + `<answer>` but no `</answer>` after it (often: cut off)
    MISSING_CODE_BLOCK = "missing_code_block"  # no fenced block in the answer where a program is required
    NO_FUNCTION_DEF = "no_function_def"  # the (first) code block holds no `def name(`
    MULTIPLE_FUNCTIONS = "multiple_functions"  # more than one `def` in the code block (the authors' Qwen setting)
    MISSING_INPUT_BLOCK = "missing_input_block"  # proposer: no ```input block and no `# Input:` line
    WRONG_INPUT_COUNT = "wrong_input_count"  # induction proposer: fewer ```input blocks than required
    MISSING_MESSAGE = "missing_message"  # induction proposer: no ```message block, <message> tag or `# Message:`


@dataclass(frozen=True)
class Generation:
    """A response as the authors' reward code reads it."""

    text: str  # "<think>" + response, cut at "Assistant:", stripped of whitespace and quotes
    format_ok: bool  # Eq 6 template check (module docstring)
    format_failure: ParseFailure | None  # why not, when not
    answer: str  # text of the last <answer> block ("" when there is no <answer>)
    has_answer: bool  # whether the generation holds an <answer> at all


def remove_special_tokens(text: str) -> str:
    """`text` without any special-token text (what decoding with `skip_special_tokens=True` gives)."""
    for token in SPECIAL_TOKEN_TEXTS:
        if token in text:
            text = text.replace(token, "")
    return text


def extract_answer(text: str) -> str:
    """After the last `<answer>`, up to the next `</answer>` (or the end), stripped; "" without `<answer>`."""
    if ANSWER_OPEN not in text:
        return ""
    return text.split(ANSWER_OPEN)[-1].split(ANSWER_CLOSE)[0].strip()


def _format_failure(text: str) -> ParseFailure | None:
    if _FORMAT.match(text):
        return None
    if THINK_CLOSE not in text:
        return ParseFailure.NO_THINK
    if not _THINK_THEN_ANSWER.search(text):
        return ParseFailure.MALFORMED_TAGS if ANSWER_OPEN in text else ParseFailure.NO_ANSWER
    return ParseFailure.UNCLOSED_ANSWER


def read_generation(response: str) -> Generation:
    """Read a response (the completion only, never prompt + completion) as the module docstring says."""
    body = remove_special_tokens(response).split(SPLITTER, 1)[0]
    text = (THINK_OPEN + body).strip().strip("\"'")
    failure = _format_failure(text)
    return Generation(text=text, format_ok=failure is None, format_failure=failure, answer=extract_answer(text),
                      has_answer=ANSWER_OPEN in text)


def learnability_answer_text(response: str) -> str:
    """The answer text of a learnability sample: `extract_answer` of the decoded response itself."""
    return extract_answer(remove_special_tokens(response))
