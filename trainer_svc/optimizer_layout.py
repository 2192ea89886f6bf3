"""The two layouts of saved optimizer state, and loading either into a plain or an FSDP-sharded trainer.

- `BY_INDEX`: torch's `Optimizer.state_dict()`; ``state`` and each group's ``params`` refer to parameters by their
  position in the optimizer. What the one-process trainer saves.
- `BY_NAME`: torch.distributed.checkpoint's full optimizer state dict; the same, keyed by the parameter's name in
  the model (``model.layers.0.mlp.up_proj.weight``). What the FSDP trainer saves: it does not depend on how the
  parameters are sharded, so a checkpoint resumes on any number of ranks.

Both trainers build AdamW over ``model.parameters()`` in module order (`make_optimizer`), so position i of one is the
parameter named by position i of ``named_parameters()`` in the other; converting between the layouts is a renaming.
With LoRA (one process only) AdamW holds the trainable adapters alone, in the same module order, saved `BY_INDEX`.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn
from torch.optim.optimizer import StateDict

OptimizerLayout = Literal["by_index", "by_name"]
BY_INDEX: OptimizerLayout = "by_index"
BY_NAME: OptimizerLayout = "by_name"


def parameter_names(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The name of each of the optimizer's parameters, in its order (all groups, concatenated)."""
    names = {id(param): name for name, param in model.named_parameters()}
    try:
        return [names[id(param)] for group in optimizer.param_groups for param in group["params"]]
    except KeyError:
        raise ValueError("the optimizer holds a parameter that is not in the model") from None


def index_to_name(state: StateDict, names: list[str]) -> StateDict:
    """A `BY_INDEX` optimizer state dict in the `BY_NAME` layout."""
    _check_count(state, len(names))
    return {
        "state": {names[int(index)]: value for index, value in state["state"].items()},
        "param_groups": [{**group, "params": [names[int(i)] for i in group["params"]]}
                         for group in state["param_groups"]],
    }


def name_to_index(state: StateDict, names: list[str]) -> StateDict:
    """A `BY_NAME` optimizer state dict in the `BY_INDEX` layout (positions as in ``names``)."""
    _check_count(state, len(names))
    position = {name: index for index, name in enumerate(names)}
    missing = [name for group in state["param_groups"] for name in group["params"] if name not in position]
    if missing:
        raise ValueError(f"saved optimizer state names parameters this model lacks: {missing[:5]}")
    return {
        "state": {position[name]: value for name, value in state["state"].items()},
        "param_groups": [{**group, "params": [position[name] for name in group["params"]]}
                         for group in state["param_groups"]],
    }


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: StateDict,
                         layout: OptimizerLayout, *, sharded: bool) -> None:
    """Load saved optimizer ``state`` of either layout into ``optimizer`` (over ``model``, FSDP-sharded or not)."""
    names = parameter_names(model, optimizer)
    if sharded:
        from trainer_svc.fsdp_wrap import load_full_optimizer_state

        load_full_optimizer_state(model, optimizer, state if layout == BY_NAME else index_to_name(state, names))
    else:
        optimizer.load_state_dict(state if layout == BY_INDEX else name_to_index(state, names))


def _check_count(state: StateDict, expected: int) -> None:
    saved = sum(len(group["params"]) for group in state["param_groups"])
    if saved != expected:
        raise ValueError(f"saved optimizer state covers {saved} parameters, this optimizer has {expected}")
