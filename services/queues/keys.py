"""Redis key names of one run's episode channels; every key is prefixed `azr:{run_id}:` so runs never collide."""

from __future__ import annotations


def episode_stream_key(run_id: str) -> str:
    """The Redis Stream carrying completed episodes to the trainer."""
    return f"azr:{run_id}:episodes"


def dead_letter_key(run_id: str) -> str:
    """The stream where unparseable episode entries are moved, with the reason (never silently dropped)."""
    return f"azr:{run_id}:episodes:dead"


def applied_set_key(run_id: str, step: int) -> str:
    """The SET of episode ids the trainer has applied, one per step so old steps can expire."""
    return f"azr:{run_id}:applied:{step}"


def policy_version_key(run_id: str) -> str:
    """The string key holding the current policy version; also the pub/sub channel announcing changes."""
    return f"azr:{run_id}:policy_version"


def as_text(value: bytes | str) -> str:
    """Redis replies are bytes unless the client decodes; accept both."""
    return value.decode() if isinstance(value, bytes) else value
