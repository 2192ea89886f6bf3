"""Episode channels between the coordinator and the trainer (docs/design.md §3), Redis or in-process, one contract
(the ports in `services/ports/queues.py`).

- `RedisEpisodeQueue` / `InProcessEpisodeQueue`: the `EpisodeQueue` port (at-least-once, acknowledged).
- `RedisAppliedEpisodeLog` / `InProcessAppliedEpisodeLog`: the trainer's dedup of redelivered episodes by id.
- `RedisPolicyVersionBoard` / `InProcessPolicyVersionBoard`: the current policy version.
- `open_episode_queue`, `open_applied_episode_log`, `open_policy_version_board`: pick by `settings.queue_backend`.
- `redis_outages`: how the Redis adapters (and the RQ executor client) ride through a Redis restart.
"""

from services.queues.applied_log import InProcessAppliedEpisodeLog, RedisAppliedEpisodeLog
from services.queues.factory import open_applied_episode_log, open_episode_queue, open_policy_version_board
from services.queues.in_process import InProcessEpisodeQueue
from services.queues.policy_version import InProcessPolicyVersionBoard, RedisPolicyVersionBoard
from services.queues.redis_stream import RedisEpisodeQueue

__all__ = [
    "InProcessAppliedEpisodeLog",
    "InProcessEpisodeQueue",
    "InProcessPolicyVersionBoard",
    "RedisAppliedEpisodeLog",
    "RedisEpisodeQueue",
    "RedisPolicyVersionBoard",
    "open_applied_episode_log",
    "open_episode_queue",
    "open_policy_version_board",
]
