"""Helpers of the proposer_api tests: a running proposer app over loopback, and settings with a test token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr
from throwaway_servers import LoopbackServer

from proposer_api.app import create_proposer_app
from services.settings import Settings


@dataclass
class RunningApi:
    """A proposer_api served over loopback, with what the test needs to look behind it."""

    url: str
    token: str
    store: Any
    executor: Any

    def client(self, token: str | None = "own", **kwargs: Any) -> httpx.Client:
        """An httpx client; `token="own"` sends the right bearer token, None sends none."""
        headers = {} if token is None else {"Authorization": f"Bearer {self.token if token == 'own' else token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=kwargs.pop("timeout", 120), **kwargs)


def settings_for(token: str, **overrides: Any) -> Settings:
    """Settings of a test service with its own token."""
    return Settings(api_token=SecretStr(token), **overrides)


def serve(app_settings: Settings, store: Any, executor: Any, **kwargs: Any) -> LoopbackServer:
    """A loopback server for a proposer app over `store` and `executor`."""
    return LoopbackServer(create_proposer_app(app_settings.api, app_settings.rollout, store, executor, **kwargs))
