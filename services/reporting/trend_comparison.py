"""Did a run's rewards rise? First-k vs last-k steps of a metrics file, and a probe before vs after. Pure.

Per-step series (one value per step, from `metrics.jsonl`): the solver's format-OK share and mean reward of each task
type (`format_ok/<type>/solve`, `reward/<type>/solve`), its right answers (`solve_rate/<type>`), the valid proposals of
the step (`valid_proposals`) and the proposers' mean reward (`reward/<type>/propose`). The test is one-sided: H1 says
the last k steps are higher than the first k. Its p-value comes from an exact permutation test of the difference in
means when C(2k, k) is small, else from `permutations` random relabellings (seeded, so the numbers are reproducible);
with it, a bootstrap 95% interval of the difference. A probe (the same held-out rows answered before and after, `azr
eval` per-sample files) is compared pairwise: rows fixed, rows broken, and an exact one-sided sign test on the
discordant pairs.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean

from services.json_types import JsonObject

TASK_TYPES = ("deduction", "abduction", "induction")
SERIES = (tuple(f"{kind}/{task_type}/solve" for kind in ("format_ok", "reward") for task_type in TASK_TYPES)
          + tuple(f"solve_rate/{task_type}" for task_type in TASK_TYPES)
          + ("valid_proposals",) + tuple(f"reward/{task_type}/propose" for task_type in TASK_TYPES))
"""The per-step series the trend test looks at, in print order: the solver's format-OK share and reward, its share
of right answers (`solve_rate`), the step's valid self-proposed tasks and the proposers' reward."""

EXACT_LIMIT = 20_000
"""Use the exact permutation distribution while C(2k, k) is at most this (k = 8 gives 12,870)."""


@dataclass(frozen=True)
class TrendResult:
    """First-k vs last-k of one series."""

    series: str
    first: list[float]
    last: list[float]
    p_value: float  # one-sided: P(difference >= observed | no trend)
    interval: tuple[float, float]  # bootstrap 95% interval of mean(last) - mean(first)
    exact: bool

    @property
    def difference(self) -> float:
        return fmean(self.last) - fmean(self.first)


def series_values(lines: Sequence[JsonObject], key: str) -> list[float]:
    """The numeric values of `key`, in step order (steps without it are skipped)."""
    ordered = sorted(lines, key=lambda line: int(line.get("step", 0)))
    return [float(line[key]) for line in ordered if isinstance(line.get(key), (int, float))
            and not isinstance(line.get(key), bool)]


def permutation_p_value(first: Sequence[float], last: Sequence[float], *, permutations: int = 20_000,
                        seed: int = 0) -> tuple[float, bool]:
    """(one-sided p-value of mean(last) − mean(first) under random relabelling, whether it is exact)."""
    pooled, k = list(first) + list(last), len(last)
    observed = fmean(last) - fmean(first)
    total = sum(pooled)

    def difference(last_sum: float) -> float:
        return last_sum / k - (total - last_sum) / (len(pooled) - k)

    tolerance = 1e-12
    if math.comb(len(pooled), k) <= EXACT_LIMIT:
        hits = count = 0
        for chosen in itertools.combinations(range(len(pooled)), k):
            count += 1
            hits += difference(sum(pooled[i] for i in chosen)) >= observed - tolerance
        return hits / count, True
    rng = random.Random(seed)
    hits = sum(difference(sum(rng.sample(pooled, k))) >= observed - tolerance for _ in range(permutations))
    return (hits + 1) / (permutations + 1), False


def bootstrap_interval(first: Sequence[float], last: Sequence[float], *, resamples: int = 10_000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of mean(last) − mean(first), resampling each window on its own."""
    rng = random.Random(seed)
    differences = sorted(fmean(rng.choices(last, k=len(last))) - fmean(rng.choices(first, k=len(first)))
                         for _ in range(resamples))
    return differences[int(0.025 * resamples)], differences[int(0.975 * resamples) - 1]


def trend(lines: Sequence[JsonObject], key: str, window: int) -> TrendResult | None:
    """First `window` vs last `window` values of `key`; None when there are fewer than 2·window values."""
    values = series_values(lines, key)
    if window < 1 or len(values) < 2 * window:
        return None
    first, last = values[:window], values[-window:]
    p_value, exact = permutation_p_value(first, last)
    return TrendResult(key, first, last, p_value, bootstrap_interval(first, last), exact)


@dataclass(frozen=True)
class ProbeComparison:
    """One split of a probe answered by two policies: accuracy and format-OK before/after, and the paired test."""

    split: str
    rows: int
    correct_before: int
    correct_after: int
    format_ok_before: int
    format_ok_after: int
    fixed: int  # wrong before, right after
    broken: int  # right before, wrong after
    p_value: float  # exact one-sided sign test: P(fixed >= observed | each discordant pair a fair coin)
    version_before: str = ""  # the checkpoint versions the rows record ("base" for none)
    version_after: str = ""


def sign_test(fixed: int, broken: int) -> float:
    """P(X >= fixed) for X ~ Binomial(fixed + broken, 1/2); 1.0 with no discordant pair."""
    n = fixed + broken
    if n == 0:
        return 1.0
    return sum(math.comb(n, i) for i in range(fixed, n + 1)) / 2 ** n


def compare_probe(before: Sequence[JsonObject], after: Sequence[JsonObject]) -> list[ProbeComparison]:
    """Pair the per-sample rows of two `azr eval` files by (id, split); ValueError when they hold other rows."""
    def keyed(samples: Sequence[JsonObject]) -> dict[tuple[str, str], JsonObject]:
        return {(str(s["id"]), str(s["split"])): s for s in samples}

    old, new = keyed(before), keyed(after)
    if old.keys() != new.keys():
        raise ValueError(f"the probes differ: {len(old.keys() ^ new.keys())} rows are in only one of them")
    out = []
    for split in sorted({split for _, split in old}):
        keys = [key for key in old if key[1] == split]
        pairs = [(bool(old[key]["correct"]), bool(new[key]["correct"])) for key in keys]
        fixed = sum(1 for was, now in pairs if now and not was)
        broken = sum(1 for was, now in pairs if was and not now)
        out.append(ProbeComparison(
            split=split, rows=len(keys), correct_before=sum(was for was, _ in pairs),
            correct_after=sum(now for _, now in pairs),
            format_ok_before=sum(bool(old[key].get("format_ok")) for key in keys),
            format_ok_after=sum(bool(new[key].get("format_ok")) for key in keys),
            fixed=fixed, broken=broken, p_value=sign_test(fixed, broken),
            version_before=_versions([old[key] for key in keys]), version_after=_versions([new[key] for key in keys])))
    return out


def _versions(samples: Sequence[JsonObject]) -> str:
    """The checkpoint version(s) the rows record: "base" where none, several joined by "/"."""
    found = sorted({str(s["checkpoint_version"]) if s.get("checkpoint_version") is not None else "base"
                    for s in samples})
    return "/".join(found)
