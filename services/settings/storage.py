"""Where buffers, episodes and policy versions are kept: the buffer database, Redis and the episode channels, and how
long their outages are ridden through."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from services.settings.section import SettingsSection
from services.settings.urls import url_with_password


class StorageSettings(SettingsSection):
    """The buffer store, Redis, and the episode queue between the coordinator and the trainer."""

    database_url: str = ""
    """SQLAlchemy URL of the buffer store: SQLite (embedded) or PostgreSQL via psycopg 3 (distributed)."""
    database_password: SecretStr | None = None
    """Password put into `database_url` when set (issue 37: deployments pass it as a secret file,
    /run/secrets/azr_database_password, never in an environment variable or a command line)."""
    redis_password: SecretStr | None = None
    """Password put into `redis_url` when set (issue 37: a secret file, /run/secrets/azr_redis_password, in Compose
    and Kubernetes)."""
    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL for RQ executor jobs and the episode stream (distributed profile)."""
    redis_outage_s: float = Field(60.0, ge=0)
    """How long the coordinator and the trainer ride through a Redis outage (a restart): each call is retried with
    backoff and a log line, and fails with Redis's error only once the outage has lasted this long (0: at once)."""
    database_outage_s: float = Field(60.0, ge=0)
    """How long the coordinator and the embedded run ride through a database outage (a PostgreSQL restart): each
    store operation is retried with backoff and a log line, and fails with the database's error only once the
    outage has lasted this long (0: one immediate retry). The APIs never wait: they answer 503 at once."""
    queue_backend: Literal["inprocess", "redis"] = "inprocess"
    """Where executor jobs and episodes travel: an in-process queue or Redis (RQ + a stream)."""
    episode_claim_after_s: float = Field(60.0, gt=0)
    """An episode read but not acknowledged for this long is redelivered to another trainer consumer."""
    applied_log_ttl_s: int = Field(7 * 24 * 3600, ge=1)
    """Expiry of the trainer's per-step sets of applied episode ids (Redis), refreshed on every write."""

    @model_validator(mode="after")
    def _put_passwords_into_urls(self) -> StorageSettings:
        """`database_password` / `redis_password` (from secret files) complete their URLs."""
        if self.database_password is not None and self.database_url:
            self.database_url = url_with_password(self.database_url, self.database_password.get_secret_value())
        if self.redis_password is not None:
            self.redis_url = url_with_password(self.redis_url, self.redis_password.get_secret_value())
        return self
