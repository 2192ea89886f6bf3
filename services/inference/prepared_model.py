"""The served model's directory as the model-prep step left it, for processes that only tokenize.

In the distributed profile the proposer and solver APIs generate through SGLang and need nothing of the model but its
tokenizer. Their pods run with a read-only root filesystem and the shared model volume mounted read-only, so they must
never build the tiny model or convert a GGUF release (minutes, gigabytes of memory, writes into the volume):
`resolve_model` does exactly that on first use. `prepared_model_dir` finds the same directory `resolve_model` would
return, but only if it is already there and holds a tokenizer; it never builds, converts or writes anything.
`wait_for_prepared_model` is what an API pod's init container runs until the inference side has prepared it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from services.inference.model_registry import (
    HUB_ID,
    RELEASES,
    ModelUnavailable,
    converted_model_path,
    default_cache_root,
    hub_snapshot_dir,
)
from services.inference.tiny_model import tiny_model_path

log = logging.getLogger(__name__)

TOKENIZER_MARKER = "tokenizer_config.json"
"""The file every saved Hugging Face tokenizer has (save_pretrained writes it; hub snapshots ship it)."""


def prepared_model_dir(name_or_path: str, cache_root: Path | None = None) -> Path:
    """The HF directory of `name_or_path` (a preset, a hub id from the local cache, or a directory) if it has been
    prepared and holds a tokenizer; ModelUnavailable saying what is missing and who prepares it otherwise."""
    root = cache_root or default_cache_root()
    if name_or_path == "tiny":
        candidate, marker = tiny_model_path(root), "config.json"
    elif name_or_path in RELEASES:
        candidate, marker = converted_model_path(RELEASES[name_or_path], root), "azr_conversion.json"
    else:
        path = Path(name_or_path).expanduser()
        hub_id = HUB_ID.match(name_or_path)
        candidate = hub_snapshot_dir(hub_id["repo"], hub_id["revision"]) if hub_id and not path.exists() else path
        marker = TOKENIZER_MARKER
    for needed in dict.fromkeys((marker, TOKENIZER_MARKER)):
        if not (candidate / needed).is_file():
            raise ModelUnavailable(
                f"model {name_or_path!r} is not prepared: no {needed} in {candidate}. This process only reads the "
                f"tokenizer and never builds or converts a model; the model-prep step (or an inference server that "
                f"resolves the same model) writes it into the shared model volume")
    return candidate


def wait_for_prepared_model(name_or_path: str, timeout_s: float, poll_s: float = 5.0,
                            cache_root: Path | None = None) -> Path:
    """prepared_model_dir, polled until it answers or `timeout_s` passes (then its ModelUnavailable), saying what it
    waits for once per minute."""
    deadline = time.monotonic() + timeout_s
    last_said = float("-inf")
    while True:
        try:
            return prepared_model_dir(name_or_path, cache_root)
        except ModelUnavailable as missing:
            now = time.monotonic()
            if now >= deadline:
                raise
            if now - last_said >= 60:
                log.warning("waiting for the model to be prepared: %s", missing)
                last_said = now
            time.sleep(min(poll_s, max(deadline - now, 0.0)))
