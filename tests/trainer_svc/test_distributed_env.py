"""torchrun's environment: detection, layout parsing, and each rank's device (no process group needed)."""

from __future__ import annotations

import pytest
import torch

from trainer_svc.distributed_env import launched_by_torchrun, rank_device, rank_layout
from trainer_svc.rank_commands import CheckpointCommand, UpdateCommand


def test_detects_torchrun_only_when_all_its_variables_are_set() -> None:
    assert launched_by_torchrun({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert not launched_by_torchrun({"RANK": "0", "WORLD_SIZE": "2"})
    assert not launched_by_torchrun({})


def test_rank_layout_parses_and_checks_consistency() -> None:
    assert rank_layout({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == (3, 4, 1)
    for bad in ({"RANK": "4", "WORLD_SIZE": "4", "LOCAL_RANK": "0"},
                {"RANK": "0", "WORLD_SIZE": "0", "LOCAL_RANK": "0"},
                {"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
                {"RANK": "0", "WORLD_SIZE": "2"},
                {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "-1"}):
        with pytest.raises(ValueError):
            rank_layout(bad)


def test_rank_device_follows_the_setting_and_local_rank() -> None:
    assert rank_device("cpu", 3) == torch.device("cpu")
    if torch.cuda.is_available():
        assert rank_device("auto", 1) == torch.device("cuda", 1)
    else:
        assert rank_device("auto", 1) == torch.device("cpu")
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            rank_device("cuda", 0)


def test_commands_validate_their_fields() -> None:
    with pytest.raises(ValueError):
        UpdateCommand(episodes=[], stale_dropped=-1)
    with pytest.raises(ValueError):
        CheckpointCommand(policy_version=0)
    assert CheckpointCommand(policy_version=2).applied_episode_ids == []
