"""The command-line arguments of `python -m sglang.launch_server` in the SGLang version our deployment pins, as data,
and an argparse parser built from them: the deployment tests parse the GPU services' launch flags with it, so a
misspelt flag, a value SGLang would refuse, or a flag it does not know fails here instead of on a GPU box.

Pinned from the sglang 0.5.23 wheel on PyPI (sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl, sha256
00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937; its `_version.py` records no commit id), read
from `sglang/srt/arg_groups/fields/{model,serving,schedule,device,observability}.py`. There each server argument is a
field; `arg_groups/arg_utils.py` turns field `x_y` into `--x-y` (plus the Arg's `aliases`), a bool field into a
store_true flag, an `Arg(choices=...)` into argparse choices, and a field without default into a required argument.
Only the arguments our manifests use (and `--api-key`, the admin key's neighbour) are listed, with their kinds.

The auth facts the admin key relies on come from the same wheel, `sglang/srt/utils/auth.py` and
`sglang/srt/entrypoints/http_server.py`: endpoints marked ADMIN_OPTIONAL (update_weights_from_disk,
pause_generation, continue_generation, flush_cache, abort_request, ...) accept only `Authorization: Bearer
<admin key>` once `--admin-api-key` is set (`--api-key` is then not accepted for them); NORMAL endpoints (/generate,
/model_info) stay open when only the admin key is set; /health*, /ready* and /metrics are always open.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

SGLANG_VERSION = "0.5.23"
"""The version the compose file and the Kubernetes overlay pin (image tag `v0.5.23`)."""


@dataclass(frozen=True)
class ServerArg:
    """One launch_server argument: its flag names, whether it is a store_true switch, its choices."""

    names: tuple[str, ...]
    switch: bool = False
    choices: tuple[str, ...] | None = None
    required: bool = False


SERVER_ARGS = (
    ServerArg(("--model-path", "--model"), required=True),  # model.py: model_path, Arg(aliases=["--model"])
    ServerArg(("--dtype",), choices=("auto", "half", "float16", "bfloat16", "float", "float32")),  # model.py
    ServerArg(("--host",)),  # serving.py
    ServerArg(("--port",)),  # serving.py (int)
    ServerArg(("--api-key",)),  # serving.py
    ServerArg(("--admin-api-key",)),  # serving.py
    ServerArg(("--weight-version",)),  # serving.py, default "default"
    ServerArg(("--skip-server-warmup",), switch=True),  # serving.py (bool)
    ServerArg(("--mem-fraction-static",)),  # schedule.py (Optional[float])
    ServerArg(("--random-seed",)),  # device.py (Optional[int])
    ServerArg(("--enable-metrics",), switch=True),  # observability.py (bool)
)

ADMIN_ENDPOINTS = ("/update_weights_from_disk", "/pause_generation", "/continue_generation", "/flush_cache",
                   "/abort_request")
"""Control endpoints the trainer calls that 0.5.23 marks ADMIN_OPTIONAL (http_server.py)."""


def launch_parser() -> argparse.ArgumentParser:
    """An argparse parser that accepts what 0.5.23's launch_server accepts for the listed arguments (no
    abbreviations: our manifests spell every flag out) and refuses anything else."""
    parser = argparse.ArgumentParser(prog="sglang.launch_server", allow_abbrev=False, exit_on_error=False)
    for arg in SERVER_ARGS:
        dest = arg.names[0].lstrip("-").replace("-", "_")
        if arg.switch:
            parser.add_argument(*arg.names, dest=dest, action="store_true")
        else:
            parser.add_argument(*arg.names, dest=dest, choices=arg.choices, required=arg.required)
    return parser


def parse_launch_args(argv: list[str]) -> argparse.Namespace:
    """The parsed launch arguments; ValueError naming what SGLang 0.5.23 would refuse."""
    parser = launch_parser()
    try:
        parsed, unknown = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit) as error:
        raise ValueError(f"sglang {SGLANG_VERSION} refuses {argv}: {error}") from None
    if unknown:
        raise ValueError(f"sglang {SGLANG_VERSION} has no argument(s) {unknown} (or they are not pinned here)")
    return parsed
