"""A trainer's whole numeric state (fp32 master weights and AdamW moments) by name, and a bitwise comparison of two:
how the resume tests show that a restarted trainer lost and repeated nothing; and what a reference trainer must
share with the run it is compared with: the run's saved settings and its updates' thread count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from services.compute.torch_threads import update_threads
from services.settings import Settings
from trainer_svc.resume import LoadedPolicy


def trainer_state(loaded: LoadedPolicy) -> dict[str, torch.Tensor]:
    """Every fp32 master weight and AdamW moment of the trainer, by name."""
    state = {f"w/{k}": v.detach().clone() for k, v in loaded.trainer.model.state_dict().items()}
    names = {id(p): n for n, p in loaded.trainer.model.named_parameters()}
    for param, moments in loaded.trainer.optimizer.state.items():
        for key, value in moments.items():
            state[f"opt/{names[id(param)]}/{key}"] = value.detach().clone()
    return state


def optimizer_steps(state: dict[str, torch.Tensor]) -> set[int]:
    """The AdamW step counts in a `trainer_state`: {n} when every parameter took n optimizer steps (a bitwise
    comparison of states that never stepped would show nothing)."""
    return {int(value) for name, value in state.items() if name.startswith("opt/") and name.endswith("/step")}


def assert_bitwise_equal(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Same names, and every tensor equal bit for bit."""
    assert actual.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(actual[name], tensor), f"{name} differs"


def saved_settings(path: Path, **overrides: Any) -> Settings:
    """Every setting a run or trainer process saved (its settings.json, or a checkpoint's), with ``overrides``: a
    reference trainer built from them updates as the process did (precision, sizes, algorithm); none is left to the
    defaults or to this process's environment."""
    saved = json.loads(path.read_text())
    saved.pop("api_token", None)  # saved masked; no update reads it
    return Settings(**{**saved, **overrides})


@contextmanager
def threads_for_updates(settings: Settings) -> Iterator[int]:
    """torch's intra-op threads, in this thread for the block, at the count the process's updates ran with
    (`update_threads`; on some CPUs an update's last bits depend on it); the previous count afterwards."""
    before = torch.get_num_threads()
    threads = update_threads(settings.run.torch_threads)
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)
