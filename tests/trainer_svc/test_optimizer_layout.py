"""Optimizer state by position (one process) and by parameter name (FSDP): lossless conversion both ways, and a
one-process trainer resumes bitwise from either layout."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from trainer_episodes import six_group_batch

from services.settings import Settings
from trainer_svc.optimizer_layout import (
    BY_INDEX,
    BY_NAME,
    index_to_name,
    load_optimizer_state,
    name_to_index,
    parameter_names,
)
from trainer_svc.resume import fresh_trainer


def test_layouts_convert_losslessly_and_either_resumes_bitwise(tiny_dir: Path, cpu_settings: Settings) -> None:
    # every batch steps (Table 3): one episode per group leaves every advantage 0, and AdamW's state must exist
    settings = cpu_settings.with_values(weight_decay=0.01, entropy_coef=0.001,
                                               skip_zero_advantage_batches=False)
    loaded = fresh_trainer(tiny_dir, settings.trainer)
    trainer = loaded.trainer
    trainer.update(six_group_batch(loaded.tokenizer, 1))
    names = parameter_names(trainer.model, trainer.optimizer)
    assert names == [name for name, _ in trainer.model.named_parameters()]
    by_index = copy.deepcopy(trainer.optimizer.state_dict())
    by_name = index_to_name(by_index, names)
    assert set(by_name["state"]) == set(names) and by_name["param_groups"][0]["params"] == names
    back = name_to_index(by_name, names)
    assert back["param_groups"] == by_index["param_groups"]
    assert all(torch.equal(back["state"][i]["exp_avg"], by_index["state"][i]["exp_avg"]) for i in by_index["state"])

    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    batch2 = six_group_batch(loaded.tokenizer, 2, policy_version=1)
    trainer.update(batch2)
    expected = trainer.model.state_dict()
    for state, layout in ((by_index, BY_INDEX), (by_name, BY_NAME)):
        other = fresh_trainer(tiny_dir, settings.trainer).trainer
        other.model.load_state_dict(weights)
        load_optimizer_state(other.model, other.optimizer, copy.deepcopy(state), layout, sharded=False)
        other.update(batch2)
        for name, tensor in other.model.state_dict().items():
            assert torch.equal(tensor, expected[name]), f"{layout}: {name}"


def test_state_of_another_model_is_refused(tiny_dir: Path, cpu_settings: Settings) -> None:
    trainer = fresh_trainer(tiny_dir, cpu_settings.trainer).trainer
    names = parameter_names(trainer.model, trainer.optimizer)
    state = {"state": {}, "param_groups": [{"lr": 1e-3, "params": names[:-1]}]}
    with pytest.raises(ValueError, match="covers"):
        name_to_index(state, names)
    renamed = {"state": {}, "param_groups": [{"lr": 1e-3, "params": ["other." + n for n in names]}]}
    with pytest.raises(ValueError, match="lacks"):
        name_to_index(renamed, names)
