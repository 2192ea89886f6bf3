"""Riding through a short Redis outage (a restart, a failover): the call is retried with backoff and a log line each
time, and Redis's error goes up only once the outage has lasted `outage_s`.

Used by the coordinator's and the trainer's Redis adapters (the episode stream, the policy-version board, the
applied-episode log, RQ executor jobs), whose operations are safe to repeat: acknowledging, marking applied and
publishing a version are idempotent, reads take what is there, and an episode appended twice (its first XADD
landed but the reply was lost) is one id, which the trainer applies once.

Only connection-level failures are retried (refused, reset, timed out, `LOADING` while Redis reads its AOF back);
an error Redis answers with (a wrong type, a script error) is a bug and goes up at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import redis

log = logging.getLogger(__name__)

T = TypeVar("T")

TRANSIENT = (redis.ConnectionError, redis.TimeoutError)
"""Failures of the connection, not of the command (`BusyLoadingError`, Redis loading its data, is one)."""


@dataclass(frozen=True)
class RedisOutagePolicy:
    """How long and how often a call is tried again while Redis does not answer."""

    outage_s: float = 60.0  # give up once the outage has lasted this long (0: never retry)
    first_wait_s: float = 0.2
    max_wait_s: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def call(self, what: str, operation: Callable[[], T]) -> T:
        """`operation()`, tried again on a transient failure until it succeeds or the outage passes `outage_s`."""
        began: float | None = None
        wait = self.first_wait_s
        tries = 0
        while True:
            try:
                result = operation()
            except TRANSIENT as error:
                now = time.monotonic()
                began = now if began is None else began
                left = self.outage_s - (now - began)
                tries += 1
                if left <= 0:
                    log.error("redis still unavailable after %.1f s (%d tries) during %s: giving up: %s",
                              now - began, tries, what, error)
                    raise
                pause = min(wait, self.max_wait_s, left)
                log.warning("redis unavailable during %s (%s: %s): try %d again in %.1f s (gives up after %.0f s "
                            "more)", what, error.__class__.__name__, error, tries + 1, pause, left)
                self.sleep(pause)
                wait = min(wait * 2, self.max_wait_s)
                continue
            if began is not None:
                log.warning("redis answers again: %s done after an outage of %.1f s (%d failed tries)", what,
                            time.monotonic() - began, tries)
            return result


NO_RETRY = RedisOutagePolicy(outage_s=0.0)
"""Fail at once (tests of what an outage looks like without riding through it)."""
