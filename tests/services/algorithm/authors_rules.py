"""A second, independent reading of model text, written straight from the published description of the authors'
reward code (their R1 format check, answer extraction and the §3.4 extraction table), in the shape of their
functions rather than ours: one function per rule, no shared helpers with services/algorithm. The corpus tests read
every committed response with both and require the same verdicts, so a change to either that departs from the
authors' rules shows up as a disagreement, whatever the committed expectations say.
"""

from __future__ import annotations

import re

FLAGS = re.DOTALL | re.IGNORECASE


def generation_of(response: str) -> str:
    """What their reward manager reads: the decoded prompt + response split at "Assistant:", the part after the
    prompt's own one, stripped of whitespace and quotes (their prompt ends in "Assistant: <think>")."""
    decoded = "User: <the task>\nAssistant: <think>" + response
    return decoded.split("Assistant:")[1].strip().strip("\"'")


def format_ok(generation: str) -> bool:
    return re.match(r"(?s)<think>.*?</think>\s*<answer>.*?</answer>", generation) is not None


def answer_of(text: str) -> str:
    if "<answer>" not in text:
        return ""
    return text.split("<answer>")[-1].split("</answer>")[0].strip()


def program_proposal(answer: str) -> tuple[str, str] | None:
    """(code, input) of a deduction/abduction proposal, or None (code_location first, one function, rename to f)."""
    code = re.search(r"```(?:python\s*)?\n?(.*?)\n?```", answer, FLAGS)
    given = re.search(r"```input\s*\n?(.*?)\n?```", answer, FLAGS) or re.search(r"# Input:\s*(.*?)(?=\n```|$)",
                                                                                 answer, FLAGS)
    if not code or not given:
        return None
    snippet = code.group(1).strip()
    names = re.findall(r"^\s*def\s+(\w+)\s*\(", snippet, re.MULTILINE)
    if len(names) != 1:
        return None
    if names[0] != "f":
        snippet = re.sub(rf"def\s+{re.escape(names[0])}\s*\(", "def f(", snippet)
        snippet = re.sub(rf"\b{re.escape(names[0])}\s*\(", "f(", snippet)
    return snippet, given.group(1).strip()


def induction_proposal(answer: str, num_inputs: int = 10) -> tuple[tuple[str, ...], str] | None:
    inputs = [m.group(1).strip() for m in re.finditer(r"```input\s*\n?(.*?)\n?```", answer, FLAGS)]
    if len(inputs) < num_inputs:
        return None
    message = (re.search(r"```message\s*\n?(.*?)\n?```", answer, FLAGS)
               or re.search(r"<message>\s*(.*?)\s*</message>", answer, FLAGS)
               or re.search(r"# Message:\s*(.*?)(?=\n```|$)", answer, FLAGS))
    if message is None:
        return None
    return tuple(inputs[-num_inputs:]), message.group(1).strip()


def solver_value(answer: str, word: str) -> str:
    """The predicted input ("input") or output ("output"): last match of the first rule that matches."""
    rules = (rf"```{word}\s*\n?(.*?)\n?```", rf"# {word.capitalize()}:\s*(.*?)(?=\n```|$)", rf"{word}\s*\((.*?)\)",
             rf"<{word}>\s*(.*?)(?:</{word}>|\s*$)", rf"the {word} is\s*(.*?)\.?$")
    for rule in rules:
        matches = list(re.finditer(rule, answer, FLAGS))
        if matches:
            return matches[-1].group(1)
    return answer


def induction_solution(answer: str) -> str | None:
    matches = list(re.finditer(r"```(?:python\s*)?\n?(.*?)\n?```", answer, FLAGS))
    return matches[-1].group(1).strip() if matches else None
