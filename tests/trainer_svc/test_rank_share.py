"""Each rank's share of the micro-batches: every micro-batch exactly once, equal passes on every rank."""

from __future__ import annotations

import pytest

from trainer_svc.rank_share import rank_share, whole_batch


@pytest.mark.parametrize(("count", "world"), [(1, 1), (3, 2), (4, 2), (5, 4), (1, 3), (7, 3), (16, 8)])
def test_shares_cover_every_micro_batch_once_with_equal_passes(count: int, world: int) -> None:
    shares = [rank_share(count, rank, world) for rank in range(world)]
    covered = sorted(i for share in shares for i in share.indices)
    assert covered == list(range(count))
    assert {share.passes for share in shares} == {-(-count // world)}
    assert all(share.idle_passes in (0, 1) for share in shares)


def test_uneven_batch_gives_the_short_rank_an_idle_pass() -> None:
    assert rank_share(3, 0, 2).indices == (0, 2) and rank_share(3, 0, 2).idle_passes == 0
    assert rank_share(3, 1, 2).indices == (1,) and rank_share(3, 1, 2).idle_passes == 1
    assert rank_share(1, 2, 3).indices == () and rank_share(1, 2, 3).idle_passes == 1


def test_one_process_takes_the_whole_batch() -> None:
    assert whole_batch(4).indices == (0, 1, 2, 3) and whole_batch(4).idle_passes == 0
    assert rank_share(4, 0, 1) == whole_batch(4)


@pytest.mark.parametrize(("count", "rank", "world"), [(3, 2, 2), (3, -1, 2), (3, 0, 0), (0, 0, 2)])
def test_impossible_layouts_are_refused(count: int, rank: int, world: int) -> None:
    with pytest.raises(ValueError):
        rank_share(count, rank, world)
