"""After a durable checkpoint: every inference engine serves it, then the new policy version is published.

Order matters: the version is published only once every engine took the weights, so an episode tagged with the
new version can only come from the new weights. A failing engine raises (InferenceError) before the publish; the
checkpoint stays on disk and the trainer re-pushes it on restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from services.ports import InferenceEngine

log = logging.getLogger(__name__)

VersionPublisher = Callable[[int], object]
"""Makes a policy version current, e.g. `PolicyVersionBoard.publish`."""


def push_weights(checkpoint: Path, policy_version: int, engines: Sequence[InferenceEngine],
                 publish: VersionPublisher | None = None) -> None:
    """``engine.update_weights(checkpoint, policy_version)`` on each engine in order, then ``publish(policy_version)``."""
    for engine in engines:
        engine.update_weights(str(checkpoint), policy_version)
        log.info("pushed %s as policy version %d to %s", checkpoint.name, policy_version, type(engine).__name__)
    if publish is not None:
        publish(policy_version)
