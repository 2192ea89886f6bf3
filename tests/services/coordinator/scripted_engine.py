"""A scripted InferenceEngine for the coordinator's unit tests: answers chosen by the test, everything else real.

The coordinator's reward wiring is checked against the REAL executor, store and queue; only the language model is
replaced by a script, so the tests can know which proposals are valid and which answers are right. Token ids are
the UTF-8 bytes of the text (a byte "tokenizer"), logprobs a constant. End-to-end tests use real models instead.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence

from services.ports import Completion, SamplingParams

Script = Callable[[str, int], str]
"""(prompt instruction, how many times this kind of prompt was seen before) -> response text."""

BEHAVIOUR_LOGPROB = -0.5


def r1(answer: str, thinking: str = "Let me think.") -> str:
    """A well-formed R1 response (Fig 33) around an answer."""
    return f"<think>{thinking}</think>\n<answer>\n{answer}\n</answer>"


def fenced(tag: str, body: str) -> str:
    return f"```{tag}\n{body}\n```"


def kind_of(instruction: str) -> str:
    """Which of the six prompts this is, from its heading (Figs 34-39)."""
    if "Create a Python Code Snippet" in instruction:
        return "propose/abduction"
    if "Create a New Python Code Snippet" in instruction:
        return "propose/deduction"
    if "Output " in instruction.splitlines()[0] and "Inputs that can be plugged" in instruction:
        return "propose/induction"
    if "Provide One Possible Input" in instruction:
        return "solve/abduction"
    if "Deduce the Output" in instruction:
        return "solve/deduction"
    if "Deduce the Function" in instruction:
        return "solve/induction"
    raise ValueError(f"unknown prompt: {instruction[:80]!r}")


def block(instruction: str, tag: str) -> str:
    """The content of the first ```tag block of a prompt."""
    match = re.search(rf"```{tag}\n(.*?)\n```", instruction, re.S)
    if match is None:
        raise ValueError(f"no ```{tag} block")
    return match.group(1)


def propose_deduction(_: str, seen: int) -> str:
    """Even calls: a valid task (doubling); odd calls: a forbidden import (the executor rejects it)."""
    if seen % 2 == 0:
        return r1(fenced("python", "def f(x):\n    return x * 2") + "\n" + fenced("input", str(seen + 1)))
    return r1(fenced("python", "import random\ndef f(x):\n    return random.random()") + "\n" + fenced("input", "1"))


def propose_induction(_: str, seen: int) -> str:
    """Ten integer inputs: valid for every one-argument program the buffers hold."""
    inputs = "\n".join(fenced("input", str(10 * seen + k)) for k in range(1, 11))
    return r1(inputs + "\n" + fenced("message", "look at the numbers"))


def solve_induction(_: str, seen: int) -> str:
    """Always the doubling function."""
    return r1(fenced("python", "def f(x):\n    return x * 2"))


def propose_abduction_every_other(_: str, seen: int) -> str:
    """Even calls: a valid a + b task; odd calls: no template at all."""
    if seen % 2 == 0:
        return r1(fenced("python", "def f(a, b):\n    return a + b") + "\n" + fenced("input", f"1, {seen + 10}"))
    return "I forgot the template entirely."


def solve_deduction(instruction: str, seen: int) -> str:
    """For the doubling program, right on even calls and wrong on odd ones; otherwise echoes the input."""
    program, given = block(instruction, "python"), block(instruction, "input")
    if "x * 2" in program:
        right = str(2 * int(given))
        return r1(fenced("output", right if seen % 2 == 0 else "-1"))
    return r1(fenced("output", given))


def solve_abduction(instruction: str, seen: int) -> str:
    """For the a + b program, right on even calls and wrong on odd ones; otherwise echoes the output."""
    program, output = block(instruction, "python"), block(instruction, "output")
    if "a + b" in program:
        return r1(fenced("input", f"0, {output}" if seen % 2 == 0 else f"0, {int(output) + 1}"))
    return r1(fenced("input", output))


# Every reward case in one step: valid and invalid proposals, right and wrong answers (tests/.../test_step.py).
STEP_SCRIPTS = {"propose/deduction": propose_deduction, "propose/abduction": propose_abduction_every_other,
           "propose/induction": propose_induction, "solve/deduction": solve_deduction,
           "solve/abduction": solve_abduction, "solve/induction": solve_induction}


def propose_abduction_always(_: str, seen: int) -> str:
    """Always a valid x + 3 task on a fresh input."""
    return r1(fenced("python", "def f(x):\n    return x + 3") + "\n" + fenced("input", str(seen + 7)))


def answer_anything(_: str, seen: int) -> str:
    """The call count as the predicted output: well-formed, seldom right."""
    return r1(fenced("output", str(seen)))


# Steps that always run: every abduction proposal valid, answers well-formed (step targets, stale rollouts).
COUNTING_SCRIPTS = {"propose/deduction": propose_deduction, "propose/abduction": propose_abduction_always,
           "propose/induction": propose_induction, "solve/deduction": answer_anything,
           "solve/abduction": lambda _, seen: r1(fenced("input", str(seen))), "solve/induction": solve_induction}


class ScriptedEngine:
    """Implements services.ports.InferenceEngine with per-kind scripts."""

    def __init__(self, scripts: dict[str, Script], version: int = 0) -> None:
        self.scripts = scripts
        self.version = str(version)
        self.seen: dict[str, int] = {}
        self.calls: list[tuple[str, int]] = []  # (kind, n) per prompt, in order
        self.prompts_seen: list[list[int]] = []  # every prompt generated from
        self._lock = threading.Lock()

    def prompt_ids(self, instruction: str) -> list[int]:
        return list(instruction.encode())

    def decode(self, token_ids: Sequence[int]) -> str:
        return bytes(token_ids).decode()

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[list[Completion]]:
        result = []
        for index, prompt in enumerate(prompts):
            instruction = self.decode(prompt)
            kind = kind_of(instruction)
            group = []
            with self._lock:
                self.calls.append((kind, sampling.n))
                self.prompts_seen.append(list(prompt))
                for _ in range(sampling.n):
                    seen = self.seen.get(kind, 0)
                    self.seen[kind] = seen + 1
                    text = self.scripts[kind](instruction, seen)
                    ids = list(text.encode())
                    group.append(Completion(prompt_index=index, text=text, output_ids=ids,
                                            logprobs=[BEHAVIOUR_LOGPROB] * len(ids), finish_reason="stop",
                                            weight_version=self.version))
            result.append(group)
        return result

    def weight_version(self) -> str:
        return self.version

    def update_weights(self, model_path: str, policy_version: int) -> None:
        self.version = str(policy_version)
