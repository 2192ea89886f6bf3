"""A trainer's whole numeric state (fp32 master weights and AdamW moments) by name, and a bitwise comparison of two:
how the resume tests show that a restarted trainer lost and repeated nothing."""

from __future__ import annotations

import torch

from trainer_svc.resume import LoadedPolicy


def trainer_state(loaded: LoadedPolicy) -> dict[str, torch.Tensor]:
    """Every fp32 master weight and AdamW moment of the trainer, by name."""
    state = {f"w/{k}": v.detach().clone() for k, v in loaded.trainer.model.state_dict().items()}
    names = {id(p): n for n, p in loaded.trainer.model.named_parameters()}
    for param, moments in loaded.trainer.optimizer.state.items():
        for key, value in moments.items():
            state[f"opt/{names[id(param)]}/{key}"] = value.detach().clone()
    return state


def assert_bitwise_equal(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Same names, and every tensor equal bit for bit."""
    assert actual.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(actual[name], tensor), f"{name} differs"
