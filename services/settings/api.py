"""The HTTP services: their token, request cap and seed quota, and where the coordinator finds them."""

from __future__ import annotations

from pydantic import Field, SecretStr

from services.settings.section import SettingsSection

DEFAULT_API_TOKEN = "change-me"
"""The placeholder token; services of the distributed profile refuse to start with it."""


class ApiSettings(SettingsSection):
    """The proposer and solver APIs (and the executor's debugging API) and the coordinator as their client."""

    api_token: SecretStr = SecretStr(DEFAULT_API_TOKEN)
    """Bearer token required by write routes; every command that serves or sends it refuses the placeholder."""
    max_request_bytes: int = Field(262_144, gt=0)
    """Largest request body the APIs accept (413 above it)."""
    proposer_url: str = "http://127.0.0.1:8001"
    """Base URL of proposer_api, for the coordinator."""
    solver_url: str = "http://127.0.0.1:8002"
    """Base URL of solver_api, for the coordinator."""
    seed_submission_quota: int = Field(1024, ge=0)
    """Entries with source `user` (POST /v1/seeds) a buffer may hold; past it the route answers 409. Source: issue
    37 (a token holder must not be able to fill a buffer); submissions are evicted like proposals."""
    rollout_api_outage_s: float = Field(120.0, ge=0)
    """How long the distributed coordinator rides through its proposer or solver API being unreachable or answering
    502/503/504 (the API, or the inference server behind it, restarting and loading its model): each request is
    retried with backoff (1 s doubling to 10 s) and a log line, and the step fails only once this long has passed."""

    def uses_default_secret(self) -> bool:
        """Whether the API token is unset or the placeholder."""
        token = self.api_token.get_secret_value()
        return token in ("", DEFAULT_API_TOKEN)

    def require_production_secrets(self) -> None:
        """Refuse to serve (or call) the APIs with a default or empty API token, in every profile (issue 37: the
        embedded `azr serve proposer` took `change-me`); `azr run` makes its own token instead."""
        if self.uses_default_secret():
            raise RuntimeError(
                "refusing to start: AZR_API_TOKEN is unset or the placeholder "
                f"{DEFAULT_API_TOKEN!r}; set a secret token, e.g. AZR_API_TOKEN=$(python3 -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')"
            )
