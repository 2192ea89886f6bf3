"""schemathesis hooks of the API contract tests (loaded by the CLI through SCHEMATHESIS_HOOKS=schemathesis_hooks).

Three things, each narrow:

- `before_call` bounds the generation cost of the routes that sample from the model (`/v1/propose`, `/v1/solve`,
  `/generate`): the tiny model on a shared CPU would need minutes for `count=512, max_new_tokens=10**9`. Each value
  is lowered only inside its documented range (a count of 375 becomes 2, never 0 or 513), so a schema-valid case stays
  schema-valid and a schema-violating one keeps its violation; what the server validates is unchanged.
- `after_call` resumes the inference server after each successful `/pause_generation`: a pause holds every later
  generation until `/continue_generation`, so one early pause would leave `/generate` tested only as "paused".
- `schema_valid_rejection_names_a_rule_the_schema_cannot_state`: `positive_data_acceptance` is told
  (schemathesis.toml) that some routes may refuse schema-valid data, because some of their rules cannot be written
  in JSON Schema (an executor's verdict on a seed program; references per proposal equal to `count`; exactly one of
  `text` or `input_ids`; a checkpoint directory that holds a model). This check keeps that exception narrow: such a
  422 must be the executor's `seed_rejected`, a model-level rule (`value_error` at `["body"]`) or text no store holds
  (`text_not_storable`, only for a body that really holds a NUL or a lone surrogate); such a 400 of the
  inference server must come from one of its own rules (not its field validation, `invalid request: ...`) or be a
  checkpoint that failed to load (`success: false`). Never a field the schema documents.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import schemathesis

GENERATION_PATHS = ("/v1/propose", "/v1/solve", "/generate")
MOST_ROWS = 2
MOST_NEW_TOKENS = 4


def _unstorable(value: Any) -> bool:
    """Whether a JSON value holds, in a string or a key, a NUL character or a lone surrogate."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return "\\u0000" in json.dumps(value)


def _positive(case: Any) -> bool:
    return case.meta is not None and case.meta.generation.mode.is_positive


def _lower(mapping: dict[str, Any], key: str, most: int, upper: int | None = None) -> None:
    """Lower `mapping[key]` to `most` when it is an integer in (most, upper]."""
    value = mapping.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and most < value and (upper is None or value <= upper):
        mapping[key] = most


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    body = case.body
    if case.operation.path not in GENERATION_PATHS or not isinstance(body, dict):
        return
    references = body.get("references")
    paired = isinstance(references, list) and references and isinstance(references[0], list) \
        and isinstance(body.get("count"), int) and len(references) == body["count"]
    _lower(body, "count", MOST_ROWS, 512)
    if paired and len(references) > body["count"]:  # one reference list per proposal stays one per proposal
        body["references"] = references[:body["count"]]
    _lower(body, "n", MOST_ROWS, 64)
    if _positive(case) and isinstance(body.get("tasks"), list):
        body["tasks"] = body["tasks"][:MOST_ROWS]
    for sampling in (body.get("sampling"), body.get("sampling_params")):
        for params in sampling if isinstance(sampling, list) else [sampling]:
            if isinstance(params, dict):
                _lower(params, "max_new_tokens", MOST_NEW_TOKENS)
                _lower(params, "n", MOST_ROWS)
                params.setdefault("max_new_tokens", MOST_NEW_TOKENS)  # the defaults are 128 and 512
    if case.operation.path == "/generate" and _positive(case) and body.get("sampling_params") is None:
        body["sampling_params"] = {"max_new_tokens": MOST_NEW_TOKENS}


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    if case.operation.path == "/pause_generation" and response.status_code == 200:
        sent = response.request  # the pause itself: same server, same admin key
        resumed = httpx.post(str(sent.url).replace("/pause_generation", "/continue_generation"), json={},
                             headers={"Authorization": sent.headers.get("Authorization", "")})
        assert resumed.status_code == 200, resumed.text


@schemathesis.check
def schema_valid_rejection_names_a_rule_the_schema_cannot_state(ctx: Any, response: Any, case: Any) -> bool | None:
    if response.status_code not in (400, 422) or not _positive(case):
        return None
    body = response.json()
    if response.status_code == 400:
        if case.operation.path == "/update_weights_from_disk" and body.get("success") is False:
            return None
        if case.operation.path == "/generate" and not str(body.get("message", "")).startswith("invalid request"):
            return None
        raise AssertionError(f"schema-valid request refused with 400: {body}")
    if body.get("problem") == "seed_rejected":
        return None
    issues = body.get("detail") or []
    if issues and all(issue.get("type") == "value_error" and issue.get("loc") == ["body"] for issue in issues):
        return None
    if issues and all(issue.get("type") == "text_not_storable" for issue in issues) and _unstorable(case.body):
        return None
    raise AssertionError(f"schema-valid request rejected for a documented field: {issues}")
