"""The record's samples page: responses picked round-robin over task types from the chosen steps, verbatim; the
self-proposed tasks counted, seed-program copies apart."""

from __future__ import annotations

from services.reporting.run_samples import pick_responses, proposed_tasks, samples_markdown


def payload(step: int, task_type: str, role: str, index: int, text: str = "<think>x</think><answer>1</answer>"):
    return {"id": f"{step}-{task_type}-{role}-{index}", "step": step, "task_type": task_type, "role": role,
            "reward": -1.0, "format_ok": True, "exec_status": "wrong_answer", "text": text, "response_ids": [1, 2]}


def entry(i: int, source: str, program_hash: str, buffer: str = "deduction", step: int = 0):
    return {"id": i, "buffer": buffer, "source": source, "program_hash": program_hash, "step": step,
            "policy_version": step, "program": f"def f(x):\n    return x + {i}", "input": "1", "output": str(1 + i),
            "inputs": None, "outputs": None, "message": None}


PAYLOADS = [payload(step, t, role, i) for step in (1, 2, 3) for t in ("deduction", "abduction", "induction")
            for role in ("propose", "solve") for i in range(2)]


def test_responses_come_round_robin_over_types_from_the_chosen_steps_only() -> None:
    picked = pick_responses(PAYLOADS, [3], "solve", 4)
    assert [p["task_type"] for p in picked] == ["deduction", "abduction", "induction", "deduction"]
    assert {p["step"] for p in picked} == {3} and {p["role"] for p in picked} == {"solve"}
    assert len(pick_responses(PAYLOADS, [1], "propose", 50)) == 6  # all there are


def test_seed_program_copies_are_counted_apart() -> None:
    entries = [entry(1, "seed", "a"), entry(2, "zero", "z"), entry(3, "proposed", "a", step=4),
               entry(4, "proposed", "b", buffer="abduction", step=2)]
    tasks = proposed_tasks(entries)
    assert [e["id"] for e in tasks.entries] == [4, 3] and [e["id"] for e in tasks.seed_copies] == [3]


def test_the_page_quotes_responses_verbatim_and_counts_the_tasks() -> None:
    odd = payload(1, "deduction", "propose", 9, text="<think>plan</think>\n<answer>\n```python\ndef f(): pass\n```")
    odd["id"] = "0"  # first of its step and type
    entries = [entry(1, "seed", "a"), entry(3, "proposed", "a", step=1)]
    text = samples_markdown([odd, *PAYLOADS], entries, window=1, per_role=3, shown_tasks=5)
    assert "~~~~\n<think>plan</think>\n<answer>\n```python\ndef f(): pass\n```\n~~~~" in text
    assert "## propose responses from the first 1 steps (3 shown)" in text
    assert "## solve responses from the last 1 steps (3 shown)" in text
    assert "## Self-proposed tasks in the buffers: 1" in text and "1 reuse a seed program" in text


def test_seed_program_copies_are_marked_where_they_are_shown() -> None:
    entries = [entry(1, "seed", "a"), entry(3, "proposed", "a", step=1), entry(4, "proposed", "b", step=2)]
    text = samples_markdown(PAYLOADS, entries, window=1, per_role=1, shown_tasks=5)
    assert "**deduction, step 1** (policy v1): a seed program with another input" in text
    assert "**deduction, step 2** (policy v2)\n" in text  # a new program: no mark


def test_windows_longer_than_half_the_steps_become_halves() -> None:
    """Three steps and a 20-step window: the first step and the last, never one step in both."""
    text = samples_markdown(PAYLOADS, [], window=20, per_role=50, shown_tasks=0)
    assert "## propose responses from the first 1 steps (6 shown)" in text
    assert "## propose responses from the last 1 steps (6 shown)" in text
    assert "**step 2," not in text and "**step 1," in text and "**step 3," in text
