"""The response format every model output must follow: the R1 tags (Fig 33) and fenced blocks (Figs 34-39). Pure.

Nothing here raises on any `str`, executes code, or does I/O. Task-level parsing lives in `parsing.py`.

Decisions (paper = Zhao et al. 2025; reference = the authors' code, /work/shared/reference/azr_reference_code.md §3):

R1 tags (`split_r1_response`). The prompt ends with "Assistant: <think>" (Fig 33), so a base model's completion starts
*inside* the think block. A response may therefore begin either with the thinking text or with an explicit `<think>`
(instruct models on their chat template, `prompts.r1_chat_messages`); surrounding whitespace is ignored. Pass the
completion only, never prompt + completion. The format is strict: exactly

    [ws] [<think>] THINKING </think> [ws] <answer> ANSWER </answer> [ws / end-of-sequence markers]

- the four tags are case-sensitive literals and each appears exactly once (`<think>` at most once, and only first);
  a tag anywhere else, also mentioned inside the thinking or the answer, is `malformed_tags`: one unambiguous answer
  per response and no way to smuggle a second one in. The reference's format regex is looser
  (`<think>.*?</think>\\s*<answer>.*?</answer>` with anything after, and the answer taken after the *last* `<answer>`);
- only whitespace between `</think>` and `<answer>` (as in the reference's `\\s*`);
- nothing but whitespace and end-of-sequence markers (`EOS_MARKERS`, in case the decoder kept special tokens) after
  `</answer>`: the model must stop when it has answered (`trailing_text`; the reference allows trailing text);
- an empty thinking is allowed (the reference's `.*?` allows it); an answer that is empty after stripping is not.
Reasons are checked in this order: no_think; malformed_tags for the think block (also an answer tag inside it);
no_answer; malformed_tags for the answer block; unclosed_answer; trailing_text; empty_answer.

Fenced blocks (`find_fenced_blocks`). An opening fence is a run of >= 3 backticks plus an optional language tag
(ASCII letters, digits, `_+#.-`) written right after it, anywhere in a line (the paper's own prompts write fences
inline, e.g. "Format your code with: ```python"); the tag is compared case-insensitively. Inside a block, the next
fence closes it; if that fence carries a tag it also opens a new block, so "```python ... ```input ..." yields two
blocks and a stray inline fence before a tagged one does no harm. A block left open runs to the end of the text
(`closed=False`): the answer tags already bound it, so a forgotten closing fence costs nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ANSWER_CLOSE",
    "ANSWER_OPEN",
    "EOS_MARKERS",
    "THINK_CLOSE",
    "THINK_OPEN",
    "FencedBlock",
    "ParseFailed",
    "ParseFailure",
    "R1Response",
    "find_fenced_blocks",
    "split_r1_response",
]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"
_TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)

EOS_MARKERS: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "</s>")
"""End-of-sequence texts (Qwen, Llama, SmolLM2, ...) tolerated after `</answer>` when a decoder keeps special tokens."""

_FENCE = re.compile(r"`{3,}([A-Za-z0-9_+#.\-]*)")


class ParseFailure(StrEnum):
    """Why a response is not well formed (Eq 6 format error). Values are stable: they are stored and counted."""

    NO_THINK = "no_think"  # no `</think>`: the think block never closes (often: cut off at max length)
    NO_ANSWER = "no_answer"  # the think block closes but no `<answer>` follows
    UNCLOSED_ANSWER = "unclosed_answer"  # `<answer>` without `</answer>` (often: cut off at max length)
    MALFORMED_TAGS = "malformed_tags"  # a tag repeated, out of order, nested, or text between `</think>` and `<answer>`
    TRAILING_TEXT = "trailing_text"  # something other than whitespace / EOS markers after `</answer>`
    EMPTY_ANSWER = "empty_answer"  # the answer block holds only whitespace
    MISSING_CODE_BLOCK = "missing_code_block"  # no non-empty ```python (or untagged) block
    MISSING_INPUT_BLOCK = "missing_input_block"  # no non-empty ```input block where one is required
    MISSING_OUTPUT_BLOCK = "missing_output_block"  # deduction solver: no ```output block, and the answer has fences
    MISSING_MESSAGE = "missing_message"  # induction proposer: no non-empty ```message block
    WRONG_INPUT_COUNT = "wrong_input_count"  # induction proposer: fewer non-empty ```input blocks than required
    NO_ENTRY_FUNCTION = "no_entry_function"  # the program parses but binds no top-level `f`


@dataclass(frozen=True)
class ParseFailed:
    """A response that could not be parsed: the reason and a short human-readable detail."""

    reason: ParseFailure
    detail: str = ""


@dataclass(frozen=True)
class R1Response:
    """A well-formed R1 response: the thinking and the answer text, both stripped of surrounding whitespace."""

    thinking: str
    answer: str
    explicit_think_open: bool  # whether the response itself wrote `<think>` (else it began inside the block)


@dataclass(frozen=True)
class FencedBlock:
    """One fenced block: its language tag (lower case, "" if none), its raw content, whether a fence closed it."""

    tag: str
    content: str
    closed: bool


def _strip_end_markers(text: str) -> str:
    """`text` without trailing whitespace and trailing end-of-sequence markers (repeated, in any order)."""
    stripped = text.rstrip()
    while True:
        for marker in EOS_MARKERS:
            if stripped.endswith(marker):
                stripped = stripped[: -len(marker)].rstrip()
                break
        else:
            return stripped


def split_r1_response(response: str) -> R1Response | ParseFailed:
    """Check the R1 format (Fig 33) strictly, as the module docstring says, and split thinking from answer."""
    body = _strip_end_markers(response).lstrip()
    explicit_open = body.startswith(THINK_OPEN)
    if explicit_open:
        body = body[len(THINK_OPEN) :]
    counts = {tag: body.count(tag) for tag in _TAGS}
    if counts[THINK_CLOSE] == 0:
        return ParseFailed(ParseFailure.NO_THINK, "no </think> closes the think block")
    if counts[THINK_OPEN] > 0 or counts[THINK_CLOSE] > 1:
        return ParseFailed(ParseFailure.MALFORMED_TAGS, "more than one think block, or <think> not at the start")
    think_end = body.index(THINK_CLOSE)
    thinking, after_think = body[:think_end], body[think_end + len(THINK_CLOSE) :]
    if ANSWER_OPEN in thinking or ANSWER_CLOSE in thinking:
        return ParseFailed(ParseFailure.MALFORMED_TAGS, "an answer tag inside the think block")
    if counts[ANSWER_OPEN] == 0:
        return ParseFailed(ParseFailure.NO_ANSWER, "no <answer> after </think>")
    if counts[ANSWER_OPEN] > 1 or counts[ANSWER_CLOSE] > 1:
        return ParseFailed(ParseFailure.MALFORMED_TAGS, "more than one answer block")
    after_think = after_think.lstrip()
    if not after_think.startswith(ANSWER_OPEN):
        return ParseFailed(ParseFailure.MALFORMED_TAGS, "text between </think> and <answer>")
    after_open = after_think[len(ANSWER_OPEN) :]
    if counts[ANSWER_CLOSE] == 0:
        return ParseFailed(ParseFailure.UNCLOSED_ANSWER, "no </answer> closes the answer block")
    answer_end = after_open.index(ANSWER_CLOSE)
    if after_open[answer_end + len(ANSWER_CLOSE) :].strip():
        return ParseFailed(ParseFailure.TRAILING_TEXT, "text after </answer>")
    answer = after_open[:answer_end].strip()
    if not answer:
        return ParseFailed(ParseFailure.EMPTY_ANSWER, "the answer block is empty")
    return R1Response(thinking=thinking.strip(), answer=answer, explicit_think_open=explicit_open)


def find_fenced_blocks(text: str) -> tuple[FencedBlock, ...]:
    """Every fenced block of `text`, in order, by the fence grammar of the module docstring. Content is raw."""
    blocks: list[FencedBlock] = []
    open_tag: str | None = None
    content_start = 0
    for fence in _FENCE.finditer(text):
        tag = fence.group(1).lower()
        if open_tag is not None:
            blocks.append(FencedBlock(open_tag, text[content_start : fence.start()], closed=True))
            if not tag:
                open_tag = None
                continue
        open_tag, content_start = tag, fence.end()
    if open_tag is not None:
        blocks.append(FencedBlock(open_tag, text[content_start:], closed=False))
    return tuple(blocks)
