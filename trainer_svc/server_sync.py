"""Keeps every inference server on the trainer's current weights: pushes each new version, and notices a server that
serves another version than the one last pushed (restarted from the base model, or down during a push) and pushes
the current weights to it again.

Why: a restarted SGLang server boots from the base model (weight_version "default", ours "0"); every sample it makes
then carries a version the trainer drops as stale, its role's batch never fills and the run stalls. So:
- a push failure on a remote server is logged and remembered, not raised (the other servers have the new weights;
  the version is published: every episode carries the version of the server that sampled it, so a lagging server
  costs samples, never correctness);
- `check()` asks every server for its `/model_info` weight_version, every `check_every_s` seconds and at once after a
  failure, and re-pushes to each one that is behind.
An in-process engine (the embedded profile's LocalEngine) cannot restart: a failure to load the weights just written
is a real error and is raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from services.inference.sglang_client import SGLangClient
from services.ports import InferenceEngine, InferenceError

log = logging.getLogger(__name__)

BASE_MODEL_VERSIONS = frozenset({"0", "default"})
"""What a server serving the base model reports: our servers say "0", SGLang says "default" until its first update."""


class WeightTarget(Protocol):
    """One thing that serves weights: a remote server (tolerated to fail) or an in-process engine."""

    @property
    def name(self) -> str: ...

    @property
    def remote(self) -> bool: ...

    def served_version(self) -> str:
        """The weight version it serves now; InferenceError when it cannot say."""

    def load(self, path: str, version: int) -> None:
        """Serve the weights at `path` as `version`; InferenceError on failure."""


@dataclass
class _Server:
    client: SGLangClient
    url: str
    remote: bool = True

    @property
    def name(self) -> str:
        return self.url

    def served_version(self) -> str:
        return self.client.server_weight_version(self.url)

    def load(self, path: str, version: int) -> None:
        self.client.update_server_weights(self.url, path, version)


@dataclass
class _Engine:
    engine: InferenceEngine
    remote: bool = False

    @property
    def name(self) -> str:
        return type(self.engine).__name__

    def served_version(self) -> str:
        return self.engine.weight_version()

    def load(self, path: str, version: int) -> None:
        self.engine.update_weights(path, version)


def weight_targets(engines: Sequence[InferenceEngine]) -> list[WeightTarget]:
    """One target per SGLang server behind each client, one per other (in-process) engine."""
    targets: list[WeightTarget] = []
    for engine in engines:
        if isinstance(engine, SGLangClient):
            targets += [_Server(engine, url) for url in engine.urls]
        else:
            targets.append(_Engine(engine))
    return targets


def serves(reported: str, version: int) -> bool:
    """Whether a server reporting `reported` serves policy version `version`."""
    return reported == str(version) or (version == 0 and reported in BASE_MODEL_VERSIONS)


@dataclass
class SyncCounters:
    """What the sync did: pushes per target, the re-pushes among them, and failures."""

    pushes: int = 0
    repushes: int = 0
    failures: int = 0
    behind: set[str] = field(default_factory=set)


class ServerSync:
    """The trainer's view of its inference servers: the weights they should serve and which ones do not."""

    def __init__(self, engines: Sequence[InferenceEngine], *, check_every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.targets = weight_targets(engines)
        self.check_every_s = check_every_s
        self.clock = clock
        self.current: tuple[Path, int] | None = None  # (directory, version) every server should serve
        self.counters = SyncCounters()
        self._next_check = 0.0

    def adopt(self, path: Path, version: int) -> None:
        """Make (path, version) current without pushing: what the servers should already serve (the base model at
        start), or what `check` will bring them to."""
        self.current = (Path(path), version)

    def push(self, path: Path, version: int) -> list[str]:
        """Make (path, version) current and push it to every target; returns the remote targets that failed (they
        are checked again soon). An in-process engine's failure raises."""
        self.adopt(path, version)
        failed = [target.name for target in self.targets if not self._load(target, repush=False)]
        if failed:
            self._next_check = self.clock()  # look again at the next check, not in check_every_s
        return failed

    def check(self, *, force: bool = False) -> list[str]:
        """Every `check_every_s` seconds (or now, with ``force``): ask each target its weight version and re-push the
        current weights to those behind. Returns the targets re-pushed successfully."""
        now = self.clock()
        if self.current is None or (not force and now < self._next_check):
            return []
        self._next_check = now + self.check_every_s
        _, version = self.current
        repushed = []
        for target in self.targets:
            try:
                reported = target.served_version()
            except InferenceError as exc:
                if not target.remote:
                    raise
                self.counters.behind.add(target.name)
                log.warning("inference server %s does not answer /model_info (%s); it gets policy version %d when it "
                            "is back", target.name, exc, version)
                continue
            if serves(reported, version):
                self.counters.behind.discard(target.name)
                continue
            log.warning("inference server %s serves weight version %r, not the current policy version %d "
                        "(restarted, or missed a push): pushing the current weights to it", target.name, reported,
                        version)
            if self._load(target, repush=True):
                repushed.append(target.name)
        return repushed

    def _load(self, target: WeightTarget, *, repush: bool) -> bool:
        assert self.current is not None
        path, version = self.current
        try:
            target.load(str(path), version)
        except InferenceError as exc:
            if not target.remote:
                raise
            self.counters.failures += 1
            self.counters.behind.add(target.name)
            self._next_check = min(self._next_check, self.clock() + self.check_every_s)
            log.error("push of policy version %d (%s) to %s failed: %s; retrying at the next check", version,
                      path.name, target.name, exc)
            return False
        self.counters.pushes += 1
        self.counters.repushes += int(repush)
        self.counters.behind.discard(target.name)
        log.info("%s %s as policy version %d to %s", "re-pushed" if repush else "pushed", path.name, version,
                 target.name)
        return True
