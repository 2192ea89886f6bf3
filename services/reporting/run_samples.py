"""A run's answers as a reader checks them: verbatim responses of its first and last steps, and the tasks it proposed.

Why: a reward can rise because answers got shorter or copied an example; whether a model learned is read from what it
wrote. Pure: rows in (the episodes' payloads and the buffer entries, as stored), Markdown out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.json_types import JsonValue

ROLES = ("propose", "solve")
TASK_TYPES = ("deduction", "abduction", "induction")
FENCE = "~~~~"
"""Responses are quoted between tildes: they hold ``` fences of their own."""

StoredRow = Mapping[str, JsonValue]
"""An episode's payload or a buffer entry as the store gives it: its keys (or columns) to JSON values."""


@dataclass(frozen=True)
class ProposedTasks:
    """The self-proposed entries of the buffers: all of them, and those whose program is a seed program."""

    entries: list[StoredRow]
    seed_copies: list[StoredRow]


def pick_responses(payloads: Sequence[StoredRow], steps: Sequence[int], role: str,
                   per_role: int) -> list[StoredRow]:
    """Up to ``per_role`` episodes of ``role`` from ``steps``, taken round-robin over the task types (so each type
    shows), in step order within a type; deterministic."""
    wanted = set(steps)
    by_type = {t: sorted((p for p in payloads if p["role"] == role and p["step"] in wanted and p["task_type"] == t),
                         key=lambda p: (p["step"], p["id"])) for t in TASK_TYPES}
    picked: list[StoredRow] = []
    index = 0
    while len(picked) < per_role and any(index < len(rows) for rows in by_type.values()):
        for task_type in TASK_TYPES:
            if index < len(by_type[task_type]) and len(picked) < per_role:
                picked.append(by_type[task_type][index])
        index += 1
    return picked


def proposed_tasks(entries: Sequence[StoredRow]) -> ProposedTasks:
    """The buffers' `proposed` entries, and among them those whose program hash is a `seed` or `zero` entry's (a
    proposal that copies a seed program with a new input is valid, but not a new program)."""
    seeded = {e["program_hash"] for e in entries if e["source"] in ("seed", "zero")}
    proposed = sorted((e for e in entries if e["source"] == "proposed"), key=lambda e: (e["step"], e["id"]))
    return ProposedTasks(proposed, [e for e in proposed if e["program_hash"] in seeded])


def _response_block(payload: StoredRow) -> str:
    status = payload.get("exec_status") or "-"
    head = (f"**step {payload['step']}, {payload['task_type']} {payload['role']}**: reward {payload['reward']:+g}, "
            f"format {'OK' if payload.get('format_ok') else 'not OK'}, status `{status}`, "
            f"{len(payload.get('response_ids') or [])} tokens")
    return f"{head}\n\n{FENCE}\n{(payload.get('text') or '').strip()}\n{FENCE}\n"


def _task_block(entry: StoredRow, seed_copy: bool = False) -> str:
    head = f"**{entry['buffer']}, step {entry['step']}** (policy v{entry['policy_version']})"
    if seed_copy:
        head += ": a seed program with another input, not a new program"
    if entry.get("inputs"):
        body = (f"{entry['program']}\n\n# message: {entry.get('message')}\n# inputs -> outputs:\n"
                + "\n".join(f"#   {i} -> {o}" for i, o in zip(entry["inputs"], entry.get("outputs") or [])))
    else:
        body = f"{entry['program']}\n\n# input:  {entry.get('input')}\n# output: {entry.get('output')}"
    return f"{head}\n\n{FENCE}python\n{body}\n{FENCE}\n"


def samples_markdown(payloads: Sequence[StoredRow], entries: Sequence[StoredRow], *, window: int,
                     per_role: int, shown_tasks: int) -> str:
    """The record's samples page: ``per_role`` verbatim responses per role from the first and from the last
    ``window`` steps, then the self-proposed tasks (counted per buffer, seed-program copies apart, the first
    ``shown_tasks`` shown). With fewer than 2 x ``window`` steps the two windows are the first and the second half,
    so that no step is shown twice."""
    steps = sorted({int(p["step"]) for p in payloads})
    window = min(window, max(1, len(steps) // 2))
    first, last = steps[:window], steps[-window:] if steps else []
    lines = [f"# Samples of the run ({len(steps)} steps with episodes)\n"]
    for label, chosen in ((f"the first {len(first)} steps", first), (f"the last {len(last)} steps", last)):
        for role in ROLES:
            picked = pick_responses(payloads, chosen, role, per_role)
            lines.append(f"## {role} responses from {label} ({len(picked)} shown)\n")
            lines.extend(_response_block(p) for p in picked)
    tasks = proposed_tasks(entries)
    counts = {b: sum(e["buffer"] == b for e in tasks.entries) for b in sorted({e["buffer"] for e in entries})}
    lines.append(f"## Self-proposed tasks in the buffers: {len(tasks.entries)}\n")
    lines.append("Per buffer: " + (", ".join(f"{b} {n}" for b, n in counts.items()) or "none") + f". Of them, "
                 f"{len(tasks.seed_copies)} reuse a seed program (with another input).\n")
    copies = {e["id"] for e in tasks.seed_copies}
    lines.extend(_task_block(e, e["id"] in copies) for e in tasks.entries[:shown_tasks])
    return "\n".join(lines)
