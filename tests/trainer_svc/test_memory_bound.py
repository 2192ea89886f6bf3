"""The trainer's memory bound: an update's peak memory grows with the micro-batch token cap, not with the batch size
or the response length, and no micro-batch's [tokens, V] logits ever exist (the LM head runs per chunk inside the
log-prob function). Measured in a fresh process on a wide-vocabulary model (memory_probe_script.py says how)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("memory_probe_script.py")
VOCAB = 65_536
SMALL = {"cap": 256, "per_group": 2, "prompt": 8, "response": 24}  # 12 episodes of 32 tokens: 2 micro-batches
LARGE = {"cap": 256, "per_group": 4, "prompt": 32, "response": 96}  # 2x the episodes, 4x the response: 12
WIDE_CAP = {**LARGE, "cap": 4096}  # the same batch under a 16x cap: one micro-batch of 24 rows x 128 tokens


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resettable RSS peak is Linux-only")
def test_peak_memory_follows_the_token_cap_not_the_batch_or_the_response_length() -> None:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(SCRIPT), json.dumps([SMALL, LARGE, WIDE_CAP])], capture_output=True,
                         text=True, timeout=300, env=env, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-3000:]
    small, large, wide = (r["peak_above_mb"] for r in json.loads(out.stdout.strip().splitlines()[-1]))
    assert abs(large - small) < 4.0, f"2x batch and 4x response length under one cap: {small:.1f} -> {large:.1f} MB"
    assert wide - large > 12.0, f"a 16x token cap must show in the peak: {large:.1f} -> {wide:.1f} MB"
    rows = min(WIDE_CAP["cap"] // (WIDE_CAP["prompt"] + WIDE_CAP["response"]), 6 * WIDE_CAP["per_group"])
    logits_mb = rows * WIDE_CAP["response"] * VOCAB * 4 / 2**20  # one float32 copy of a micro-batch's logits
    assert wide < logits_mb / 4, f"peak {wide:.1f} MB: the {logits_mb:.0f} MB of full logits must never exist"
