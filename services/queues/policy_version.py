"""The policy-version board: the trainer publishes the version it last pushed; the coordinator and services read it.

Redis: the key `azr:{run_id}:policy_version`, moved forward only (a Lua script compares and sets atomically), and a
PUBLISH on the channel of the same name so listeners need not poll.

The one way back is `rewind`: a trainer restored from its last full checkpoint (version K) after a crash had
published versions past K whose updates were never checkpointed; those versions did not happen (their episodes are
redelivered and applied again, making K+1, K+2, ... anew), so the board is set back to K before the trainer goes on.

Every operation rides through a short Redis outage (`services.queues.redis_outages`); all three are safe to repeat.
"""

from __future__ import annotations

import threading

import redis

from services.ports import PolicyVersionRegression
from services.queues.keys import policy_version_key
from services.queues.redis_outages import RedisOutagePolicy

_PUBLISH_FORWARD = """
local current = redis.call('GET', KEYS[1])
local proposed = tonumber(ARGV[1])
if current and proposed < tonumber(current) then
  return {0, tonumber(current)}
end
if (not current) or proposed > tonumber(current) then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('PUBLISH', KEYS[1], ARGV[1])
end
return {1, proposed}
"""


def check_policy_version(version: int) -> None:
    """Refuse negative or non-integer versions with a clear error."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"policy version must be a non-negative integer, got {version!r}")


class RedisPolicyVersionBoard:
    """PolicyVersionBoard in Redis, shared by every process of a run."""

    def __init__(self, redis_client: redis.Redis, run_id: str, outages: RedisOutagePolicy | None = None) -> None:
        self.redis = redis_client
        self.key = policy_version_key(run_id)
        self._publish = redis_client.register_script(_PUBLISH_FORWARD)  # re-loaded by EVALSHA's NOSCRIPT fallback
        self.outages = outages or RedisOutagePolicy()

    @property
    def channel(self) -> str:
        """The pub/sub channel announcing each new version (same name as the key)."""
        return self.key

    def publish(self, version: int) -> int:
        """Make `version` current (no-op when it already is); PolicyVersionRegression when it is older."""
        check_policy_version(version)
        accepted, current = self.outages.call(f"publishing policy version {version}",
                                              lambda: self._publish(keys=[self.key], args=[version]))
        if not int(accepted):
            raise PolicyVersionRegression(f"policy version {version} is older than the published {int(current)}")
        return int(current)

    def current(self) -> int:
        """The published version, or 0 (the base model) when none was published."""
        value = self.outages.call("reading the policy version", lambda: self.redis.get(self.key))
        return int(value) if value is not None else 0

    def rewind(self, version: int) -> int:
        """Make `version` current even when an older one than the published (a trainer restored from its last full
        checkpoint); announced on the channel like a publish."""
        check_policy_version(version)

        def set_back() -> None:
            pipe = self.redis.pipeline(transaction=True)
            pipe.set(self.key, version)
            pipe.publish(self.key, version)
            pipe.execute()

        self.outages.call(f"rewinding the policy version to {version}", set_back)
        return version


class InProcessPolicyVersionBoard:
    """PolicyVersionBoard as an attribute, for the embedded profile."""

    def __init__(self) -> None:
        self._version = 0
        self._lock = threading.Lock()

    def publish(self, version: int) -> int:
        """Make `version` current; PolicyVersionRegression when it is older than the current one."""
        check_policy_version(version)
        with self._lock:
            if version < self._version:
                raise PolicyVersionRegression(f"policy version {version} is older than the published {self._version}")
            self._version = version
            return version

    def current(self) -> int:
        """The published version, or 0 before any."""
        with self._lock:
            return self._version

    def rewind(self, version: int) -> int:
        """Make `version` current even when older than the published one (a trainer restored from a checkpoint)."""
        check_policy_version(version)
        with self._lock:
            self._version = version
            return version
