"""FSDP2 for the policy: `fully_shard` on every decoder layer and on a `ResponseLogprobs` root, and the collectives that
turn the shards back into full state dicts for a checkpoint (and full optimizer state back into shards on resume).

Sharding choices:
- One FSDP unit per decoder layer (its parameters are gathered just for its forward and backward), plus the root
  unit holding the rest (embeddings, final norm, LM head: tied embeddings stay one parameter in one unit).
- Gradients are *summed* across ranks, not averaged (divide factor 1, SUM reductions): each rank's loss already is
  its share of the whole batch's token-mean (Σ over its tokens / the batch's token count), so the sum is the
  gradient of the one-process loss. SUM-only reductions also work on gloo, which has no AVG / PREMUL_SUM.
- Mixed precision on CUDA when ``bf16``: bf16 parameters for compute, fp32 gradient reduction, fp32 shards as the
  master weights AdamW updates. On CPU everything stays fp32.
- Every rank loads the full model on CPU before sharding (fine up to a few billion parameters per node; larger
  models would want meta-device init + `set_model_state_dict(broadcast_from_rank0=True)`).
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.optim.optimizer import StateDict

from trainer_svc.distributed_env import RankInfo
from trainer_svc.policy_forward import ResponseLogprobs

GATHER_OPTIONS = StateDictOptions(full_state_dict=True, cpu_offload=True)
"""Full (unsharded) tensors, on CPU, on rank 0 only (the other ranks get empty dicts)."""


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks of an HF causal LM: modules whose class HF lists in ``_no_split_modules``."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [module for module in model.modules() if type(module).__name__ in names]
    if not layers:
        raise ValueError(f"{type(model).__name__} names no decoder layer class in _no_split_modules ({names}); "
                         "cannot choose FSDP units")
    return layers


def mixed_precision(device: torch.device, bf16: bool) -> MixedPrecisionPolicy:
    """bf16 compute with fp32 gradient reduction on CUDA when asked; full fp32 otherwise."""
    if device.type == "cuda" and bf16:
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def shard_policy(model: nn.Module, ranks: RankInfo, *, bf16: bool) -> ResponseLogprobs:
    """Shard ``model`` in place over all ranks; returns the FSDP root whose forward the update calls.

    Build the optimizer after this: sharding replaces every parameter with a DTensor shard.
    """
    model.to(ranks.device)
    mesh = init_device_mesh(ranks.device.type, (ranks.world_size,))
    policy = mixed_precision(ranks.device, bf16)
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    root = ResponseLogprobs(model)
    fully_shard(root, mesh=mesh, mp_policy=policy)
    for module in root.modules():
        if isinstance(module, FSDPModule):  # per unit: these setters are not recursive
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)
    return root


def grad_norm_value(norm: torch.Tensor) -> float:
    """A grad norm as a float; `clip_grad_norm_` over DTensor gradients returns a replicated DTensor."""
    return float(norm.full_tensor() if isinstance(norm, DTensor) else norm)


def gather_full_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The LM's full state dict (HF names, CPU, fp32 master weights) on rank 0; {} elsewhere. Collective."""
    # full_state_dict gathers every DTensor shard into a plain tensor: the values are tensors, not the general ValueType
    return cast(dict[str, torch.Tensor], get_model_state_dict(model, options=GATHER_OPTIONS))


def gather_full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> StateDict:
    """The optimizer's full state keyed by parameter name (see `optimizer_layout`) on rank 0; {} elsewhere.
    Collective."""
    return get_optimizer_state_dict(model, optimizer, options=GATHER_OPTIONS)


def load_full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: StateDict) -> None:
    """Load a full, by-name optimizer state (the same dict on every rank): each rank keeps its shard. Collective."""
    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
