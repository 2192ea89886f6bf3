"""The control plane of SGLang servers, one server at a time: the weight push (pause → update_weights_from_disk →
continue), `/model_info` (the weight version a server serves) and `/health`.

- The admin key: SGLang started with `--admin-api-key` accepts its control endpoints (`/pause_generation`,
  `/update_weights_from_disk`, `/continue_generation`, ...) only with `Authorization: Bearer <key>`; `/generate`,
  `/model_info` and `/health` stay open. `SGLangControl` sends the key on exactly those control POSTs when it has one;
  a 401/403 there is an InferenceError that names the setting (`AZR_SGLANG_ADMIN_API_KEY`), never retried.
- A push is per server, so the trainer can bring one restarted server back (it boots from the base model with
  weight_version "default"/"0") without pausing the others.
"""

from __future__ import annotations

import httpx
from pydantic import ValidationError

from services.inference.sglang_schemas import ModelInfoResponse
from services.ports import InferenceError

CONTROL_PATHS = frozenset({"/pause_generation", "/update_weights_from_disk", "/continue_generation"})
"""The control endpoints this project calls; SGLang guards them (and a few more) with the admin key."""


class ServerFailure(Exception):
    """One attempt at one server failed in a retryable way (5xx, timeout, connection)."""


class SGLangControl:
    """Control-plane calls to SGLang servers over one HTTP client."""

    def __init__(self, http: httpx.Client, admin_api_key: str | None = None) -> None:
        """`admin_api_key`: the servers' `--admin-api-key`, sent on control endpoints (None or empty: none)."""
        self._http = http
        self._admin_key = admin_api_key or None

    def headers_for(self, path: str) -> dict[str, str]:
        """The admin `Authorization` header on control endpoints when a key is set; nothing elsewhere."""
        if self._admin_key is not None and path in CONTROL_PATHS:
            return {"Authorization": f"Bearer {self._admin_key}"}
        return {}

    def post(self, url: str, path: str, body: dict[str, object]) -> httpx.Response:
        """One POST; ServerFailure for what a retry can fix, InferenceError when the admin key is refused; any other
        answer is returned for the caller to judge."""
        try:
            response = self._http.post(url + path, json=body, headers=self.headers_for(path))
        except httpx.HTTPError as exc:  # timeouts, refused connections, broken transfers
            raise ServerFailure(f"{url}{path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise ServerFailure(f"{url}{path}: HTTP {response.status_code}: {response.text[:300]}")
        if response.status_code in (401, 403) and path in CONTROL_PATHS:
            what = "missing" if self._admin_key is None else "refused"
            raise InferenceError(f"{url}{path}: HTTP {response.status_code}: the admin API key was {what} (set "
                                 f"AZR_SGLANG_ADMIN_API_KEY to the servers' --admin-api-key)")
        return response

    def model_info(self, url: str) -> ModelInfoResponse:
        """`GET /model_info` of one server; InferenceError when it does not answer or answers something else."""
        try:
            response = self._http.get(url + "/model_info")
            response.raise_for_status()
            return ModelInfoResponse.model_validate(response.json())
        except (httpx.HTTPError, ValueError, ValidationError) as exc:
            raise InferenceError(f"{url}/model_info failed: {exc}") from exc

    def health(self, url: str) -> bool:
        """Readiness of one server: `GET /health` answered 200."""
        try:
            return self._http.get(url + "/health").status_code == 200
        except httpx.HTTPError:
            return False

    def push(self, url: str, model_path: str, version: str) -> None:
        """Pause (abort) → update_weights_from_disk → continue (always), then check that `/model_info` reports
        `version`. InferenceError (or ServerFailure) saying what failed."""
        paused = self.post(url, "/pause_generation", {"mode": "abort"})
        if paused.status_code != 200:
            raise InferenceError(f"pause_generation refused: HTTP {paused.status_code}: {paused.text[:300]}")
        try:
            response = self.post(url, "/update_weights_from_disk",
                                 {"model_path": model_path, "weight_version": version})
            try:
                body = response.json()
            except ValueError:
                body = {}
            if response.status_code != 200 or not body.get("success", False):
                raise InferenceError(f"update_weights_from_disk failed (HTTP {response.status_code}): "
                                     f"{body.get('message', response.text[:300])}")
        finally:
            self.post(url, "/continue_generation", {})
        served = self.model_info(url).weight_version
        if served != version:
            raise InferenceError(f"{url} reports weight version {served} after updating to {version}")
