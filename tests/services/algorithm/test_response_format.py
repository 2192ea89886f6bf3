"""The generation, format check and answer text (services/algorithm/response_format.py), rule by rule.

Each rule of docs/reading-rules.md §1 has a test; `ACCEPTED_NOW` are responses the authors' reward code accepts and
our first parser refused (its reason is in the comment), so a return to the stricter reading fails here.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.algorithm.response_format import (
    ParseFailure,
    extract_answer,
    learnability_answer_text,
    read_generation,
    remove_special_tokens,
)

F = ParseFailure


def test_the_generation_begins_with_think_as_the_prompt_ends_with_it() -> None:
    generation = read_generation(" plan\n</think>\n<answer>42</answer>")
    assert generation.text == "<think> plan\n</think>\n<answer>42</answer>"
    assert generation.format_ok and generation.answer == "42"


def test_a_response_that_writes_its_own_think_tag_reads_the_same() -> None:
    generation = read_generation("<think>plan</think><answer>42</answer>")
    assert generation.format_ok and generation.answer == "42"


ACCEPTED_NOW = [
    # trailing_text before: text after </answer> is allowed (the format regex only anchors at the start)
    ("plan</think><answer>1</answer>\nI hope this helps!", "1"),
    # malformed_tags before: a tag mentioned inside the thinking
    ("I must close with </answer> and open <answer> later</think>\n<answer>2</answer>", "2"),
    # malformed_tags before: two answer blocks; the last one counts
    ("plan</think><answer>first</answer> wait <answer>second</answer>", "second"),
    # empty_answer before: an empty answer is well formed (it is then wrong, not unformatted)
    ("plan</think><answer>   </answer>", ""),
    # a second </think> later in the text
    ("a</think> b </think>\n<answer>3</answer>", "3"),
]


@pytest.mark.parametrize(("response", "answer"), ACCEPTED_NOW)
def test_responses_the_authors_accept_are_well_formed(response: str, answer: str) -> None:
    generation = read_generation(response)
    assert generation.format_ok, generation.format_failure
    assert generation.answer == answer


@pytest.mark.parametrize(("response", "reason"), [
    ("I keep thinking and never stop", F.NO_THINK),
    ("plan</think> and then nothing", F.NO_ANSWER),
    ("plan</think> Here it is: <answer>1</answer>", F.MALFORMED_TAGS),  # text between </think> and <answer>
    ("plan</think><answer>1", F.UNCLOSED_ANSWER),  # cut off at the token limit
    ("plan</think><Answer>1</Answer>", F.NO_ANSWER),  # tags are case-sensitive
    ("plan</THINK><answer>1</answer>", F.NO_THINK),
])
def test_format_errors_and_their_reasons(response: str, reason: ParseFailure) -> None:
    generation = read_generation(response)
    assert not generation.format_ok
    assert generation.format_failure is reason


def test_an_unclosed_answer_is_still_read_to_the_end() -> None:
    generation = read_generation("plan</think><answer>```output\n5\n```\nand more")
    assert not generation.format_ok
    assert generation.answer == "```output\n5\n```\nand more"


def test_no_answer_tag_reads_as_the_empty_answer() -> None:
    generation = read_generation("plan</think>```output\n5\n```")
    assert generation.answer == "" and not generation.has_answer


def test_the_response_is_cut_at_assistant_colon() -> None:
    """The authors split the decoded text at "Assistant:" and keep the part after the prompt's own one."""
    dialogue = "plan</think><answer>1</answer>\nUser: another question\nAssistant: <think>x</think><answer>2</answer>"
    generation = read_generation(dialogue)
    assert generation.format_ok and generation.answer == "1"
    early = read_generation("plan</think>\nAssistant: <answer>1</answer>")
    assert early.format_failure is F.NO_ANSWER and early.answer == ""


def test_quotes_around_the_generation_are_stripped() -> None:
    """`.strip().strip('"\\'')`: a quote at the very end goes, which matters only to an unclosed answer."""
    assert read_generation("plan</think><answer>1</answer>'").text.endswith("</answer>")
    assert read_generation("plan</think><answer>'abc'").answer == "'abc"


def test_special_token_texts_are_removed_everywhere() -> None:
    response = "plan<|im_end|></think><answer>7</answer><|im_end|><|endoftext|>"
    assert remove_special_tokens(response) == "plan</think><answer>7</answer>"
    assert read_generation(response).format_ok and read_generation(response).answer == "7"


def test_added_tokens_the_tokenizer_does_not_mark_special_stay_as_the_authors_decode_keeps_them() -> None:
    response = "plan</think><answer><|fim_middle|>7<|file_sep|></s></answer>"
    assert remove_special_tokens(response) == response
    assert read_generation(response).answer == "<|fim_middle|>7<|file_sep|></s>"


def test_extract_answer_takes_the_last_open_tag_up_to_the_next_close() -> None:
    assert extract_answer("<answer>a</answer><answer> b </answer> tail </answer>") == "b"
    assert extract_answer("no tags at all") == ""


def test_learnability_reads_the_raw_response_without_cutting_or_stripping() -> None:
    """Learnability samples are read from the decoded response alone (no "Assistant:" cut, no quote strip)."""
    response = "x</think>Assistant: <answer>'a'"
    assert learnability_answer_text(response) == "'a'"
    assert read_generation(response).answer == ""  # the trainer-side reading cuts before "Assistant:"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab <>/\n'\"`") + ["<think>", "</think>", "<answer>", "</answer>",
                                                         "Assistant:", "<|im_end|>"]), max_size=30).map("".join))
def test_reading_never_raises_and_the_verdict_matches_its_reason(text: str) -> None:
    generation = read_generation(text)
    assert generation.format_ok == (generation.format_failure is None)
    assert generation.answer == generation.answer.strip()
