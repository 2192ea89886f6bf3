"""Normalised program identity: formatting, comments and docstrings do not matter; names and structure do."""

from __future__ import annotations

import json
from pathlib import Path

from services.algorithm.program_identity import (
    entry_key,
    normalise_arguments,
    normalise_program,
    program_and_entry_keys,
    program_hash,
)


def test_comments_formatting_and_docstrings_do_not_change_the_hash() -> None:
    variants = [
        "def f(x):\n  return x  # hi",
        "def f(x): return x",
        'def f(x):\n    """Return x."""\n    return x\n\n\n',
        "# leading comment\ndef f(x):\r\n    return (x)",
    ]
    assert len({program_hash(variant) for variant in variants}) == 1
    assert normalise_program(variants[0]) == "def f(x):\n    return x"


def test_a_function_that_is_only_a_docstring_keeps_a_valid_body() -> None:
    normalised = normalise_program('def f(x):\n    "only a docstring"')
    assert normalised == "def f(x):\n    pass"
    compile(normalised, "<normalised>", "exec")


def test_renaming_reordering_or_changing_constants_changes_the_hash() -> None:
    base = program_hash("def f(x): return x + 1")
    assert program_hash("def f(y): return y + 1") != base  # documented limit: names count
    assert program_hash("def f(x): return 1 + x") != base
    assert program_hash("def f(x): return x + 2") != base
    # '#' in a string is no comment
    assert program_hash("def f(x): return 'a#b'") != program_hash("def f(x): return 'a'")


def test_arguments_are_normalised_like_programs() -> None:
    assert normalise_arguments("1,2") == normalise_arguments(" 1, 2 ") == "1, 2"
    assert normalise_arguments("'a', key = [1,2]") == "'a', key=[1, 2]"
    assert normalise_arguments('"Hello"') == normalise_arguments("'Hello'")
    assert normalise_arguments("1)(2") == "1)(2"  # not one argument list: kept as text
    assert normalise_arguments("(") == "("


def test_entry_key_depends_on_program_inputs_and_their_order() -> None:
    key = entry_key("def f(a, b): return a - b", ["1, 2"])
    assert entry_key("def f(a, b):\n    return a - b  # minus", ["1,2"]) == key
    assert entry_key("def f(a, b): return a - b", ["2, 1"]) != key
    assert entry_key("def f(x): return x", ["1", "2"]) != entry_key("def f(x): return x", ["2", "1"])
    assert len(key) == 64 and int(key, 16) >= 0


def test_unparseable_text_falls_back_to_its_stripped_source() -> None:
    assert normalise_program("def f(:\n  return 1   \n") == "def f(:\n  return 1"


def test_every_seed_program_normalises_to_code_that_compiles(shared_dir: Path) -> None:
    path = shared_dir / "data" / "azr_seeds" / "7b_coder_seed_io.jsonl"
    programs = [json.loads(line)["snippet"] for line in path.open() if line.strip()]
    for program in programs:
        normalised = normalise_program(program)
        compile(normalised, "<seed>", "exec")
        assert normalise_program(normalised) == normalised  # idempotent
def test_program_and_entry_keys_normalise_once_and_agree() -> None:
    assert program_and_entry_keys("def f(x): return x", ["1"]) == (program_hash("def f(x):\n    return x"),
                                                                  entry_key("def f(x): return x", ["1"]))
