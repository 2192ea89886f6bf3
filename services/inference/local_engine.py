"""`LocalEngine`: the InferenceEngine port over a transformers model in this process (embedded profile).

CPU by default, CUDA when present (`device="auto"`). Each prompt is prefilled once and sampled `n` times; prompts
are decoded in batches of at most `max_batch_rows` rows with left padding and a KV cache
(services.inference.decoding). Logprobs are
the behaviour log-probabilities defined in services.inference.sampling: plain model log-probs at temperature 1 and
for greedy decoding, `log_softmax(logits / T)` at other temperatures.

Reproducibility: with `SamplingParams.seed` every sample draws from its own generator, seeded `seed + k` for the
k-th sample of the request (`sampling.sample_seeds`), so the same request with the same seed gives the same samples
and the n samples of one prompt differ; without a seed the engine's own generator (seeded once from `seed`) advances
across calls, so a run is reproducible from the engine seed and the order of its calls.

Thread safety: one lock serialises generation and weight swaps; a checkpoint is loaded outside the lock and only
the swap itself waits for the running generation to end.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from services.compute import cpu_features
from services.compute.process_memory import release_free_memory
from services.inference.causal_lm import hf_model
from services.inference.chat_codec import PromptCodec, PromptForm
from services.inference.decoding import DecodeProgress, RawSample, RowSpec, decode_rows
from services.inference.generation_hooks import NO_HOOKS, GenerationHooks
from services.inference.sampling import sample_seeds
from services.ports import Completion, InferenceError, SamplingParams
from services.settings import InferenceSettings, RunSettings

INITIAL_WEIGHT_VERSION = "0"
"""The version of the weights an engine starts with (policy version 0: the base model)."""


def pick_device(device: str) -> torch.device:
    """`auto` -> CUDA when available, else CPU; anything else is passed to torch."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def default_dtype(device: torch.device) -> torch.dtype:
    """The engine's dtype when none is given: float32 on CPU (what tests compare exactly), bfloat16 on CUDA."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def engine_dtype(choice: str, device: torch.device) -> torch.dtype:
    """`Settings.local_engine_dtype` on `device`. `auto`: bfloat16 on CUDA and on CPUs with native bf16 (where the
    default model prefills ~2.2x and decodes 1.1-1.4x faster than in float32: README, bench/cpu_speedups.py), else
    float32."""
    if choice in ("float32", "bfloat16"):
        return getattr(torch, choice)
    if choice != "auto":
        raise ValueError(f"unknown local_engine_dtype {choice!r}")
    return torch.bfloat16 if device.type == "cuda" or cpu_features.cpu_has_native_bf16() else torch.float32


def settings_engine_dtype(settings: InferenceSettings, run: RunSettings) -> torch.dtype:
    """The dtype a local engine built from `settings` loads its weights in (`local_engine_dtype` on the run's
    `device`)."""
    return engine_dtype(settings.local_engine_dtype, pick_device(run.device))


def load_causal_lm(model_dir: str | Path, device: torch.device, dtype: torch.dtype, *,
                   progress_bar: bool = True) -> torch.nn.Module:
    """An HF causal LM from a local directory, in eval mode on `device`; InferenceError when it cannot load.
    `progress_bar=False` hides transformers' "Loading weights" bar (a weight update every step would print one into
    the run's log each time); the switch is process-wide in transformers, so it is put back after the load."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise InferenceError(f"no HF model directory at {path} (config.json missing)")
    shown = hf_logging.is_progress_bar_enabled()
    if not progress_bar:
        hf_logging.disable_progress_bar()
    try:
        model: torch.nn.Module = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InferenceError(f"cannot load the model at {path}: {exc}") from exc
    finally:
        if shown and not progress_bar:
            hf_logging.enable_progress_bar()
    return model.to(device).eval()


def ends_with_module_path(name: str, suffixes: Sequence[str]) -> bool:
    """Whether module `name` ends in one of `suffixes` at a dot: `layers.2.mlp.down_proj` matches
    `model.layers.2.mlp.down_proj`, not `model.layers.12.mlp.down_proj`."""
    return any(name == suffix or name.endswith("." + suffix) for suffix in suffixes)


def quantize_linear_int8(model: torch.nn.Module, keep_float: Sequence[str] = (), *,
                         per_channel: bool = False) -> torch.nn.Module:
    """`model` with every `nn.Linear` (but those whose names end in one of `keep_float` at a dot, e.g. `down_proj`
    or `layers.2.mlp.down_proj`) replaced in place by a dynamically quantized int8 one (CPU kernels: fbgemm / oneDNN):
    weights int8 with one scale per tensor, or per output channel with `per_channel`; activations quantized per batch
    as they arrive. Embeddings, norms and the attention's softmax stay float32."""
    qconfig = (torch.ao.quantization.per_channel_dynamic_qconfig if per_channel
               else torch.ao.quantization.default_dynamic_qconfig)
    spec = {name: qconfig for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and not ends_with_module_path(name, keep_float)}
    with warnings.catch_warnings():
        # torch.ao's eager quantization is deprecated in favour of the separate torchao package; it still ships with
        # torch (no extra dependency) and its kernels are the ones measured (docs/benchmarks.md).
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)


class LocalEngine:
    """Generates with a transformers model in this process; implements `services.ports.InferenceEngine`."""

    def __init__(self, model_dir: str | Path, device: str = "auto", dtype: torch.dtype | None = None,
                 seed: int = 0, max_batch_rows: int = 32, int8_linear: bool = False,
                 int8_keep_float: Sequence[str] = (), int8_per_channel: bool = False,
                 hooks: GenerationHooks = NO_HOOKS) -> None:
        """Load the model and tokenizer from an HF directory (see `services.inference.model_registry` for names).
        `int8_linear`: generate with int8 Linear layers (`local_engine_int8`; CPU and float32 only), but those whose
        names end in one of `int8_keep_float` (`local_engine_int8_keep_float`), with one weight scale per output
        channel when `int8_per_channel` (`local_engine_int8_per_channel`). `hooks`: its decoding-step and
        before-forward callbacks."""
        self.model_dir = Path(model_dir)
        self.device = pick_device(device)
        self.dtype = dtype or default_dtype(self.device)
        if int8_linear and (self.device.type != "cpu" or self.dtype != torch.float32):
            raise InferenceError(f"int8 Linear layers need a CPU engine in float32 (this one: {self.device.type}, "
                                 f"{str(self.dtype).removeprefix('torch.')}): set AZR_LOCAL_ENGINE_DTYPE=float32 "
                                 "or AZR_LOCAL_ENGINE_INT8=false")
        self.int8_linear = int8_linear
        self.int8_keep_float = tuple(int8_keep_float)
        self.int8_per_channel = int8_per_channel
        self.max_batch_rows = max_batch_rows
        self.codec = PromptCodec.from_model_dir(self.model_dir)
        self._model = self._load(self.model_dir)
        self._model_path = str(self.model_dir)
        self._version = INITIAL_WEIGHT_VERSION
        self._lock = threading.Lock()
        self._generator = torch.Generator(device=self.device).manual_seed(seed)
        self._eos_ids = self.codec.eos_token_ids() | self._config_eos_ids(self._model)
        self.on_decode_step: Callable[[DecodeProgress], None] | None = hooks.on_decode_step
        """Called after every decoding step of every batch (a live progress display)."""
        self.before_forward: Callable[[], None] | None = hooks.before_forward
        """Called before every forward pass of generation (the embedded run sets torch's thread count there)."""

    @classmethod
    def from_settings(cls, model_dir: str | Path, settings: InferenceSettings, run: RunSettings, *,
                      seed: int | None = None, max_batch_rows: int = 32,
                      hooks: GenerationHooks = NO_HOOKS) -> LocalEngine:
        """The engine `settings` describe on the run's device: its dtype (`local_engine_dtype`), int8 layers and
        seed (the run's unless given)."""
        dtype = torch.float32 if settings.local_engine_int8 else settings_engine_dtype(settings, run)
        return cls(model_dir, device=run.device, dtype=dtype, seed=run.seed if seed is None else seed,
                   max_batch_rows=max_batch_rows, int8_linear=settings.local_engine_int8,
                   int8_keep_float=settings.local_engine_int8_keep_float,
                   int8_per_channel=settings.local_engine_int8_per_channel, hooks=hooks)

    def _load(self, model_dir: str | Path, *, progress_bar: bool = True) -> torch.nn.Module:
        model = load_causal_lm(model_dir, self.device, self.dtype, progress_bar=progress_bar)
        if not self.int8_linear:
            return model
        return quantize_linear_int8(model, self.int8_keep_float, per_channel=self.int8_per_channel)

    @staticmethod
    def _config_eos_ids(model: torch.nn.Module) -> set[int]:
        """EOS ids from the model's generation config (Qwen instruct models list both <|im_end|> and
        <|endoftext|>)."""
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            return set()
        return {int(e) for e in eos} if isinstance(eos, (list, tuple)) else {int(eos)}

    # ------------------------------------------------------------------------------------------ port methods

    @property
    def prompt_form(self) -> PromptForm:
        """`chat` for instruct models (a chat template), `plain` for base models."""
        return self.codec.form

    def prompt_ids(self, instruction: str) -> list[int]:
        """Token ids of the R1 prompt for a task instruction (see PromptCodec)."""
        return self.codec.prompt_ids(instruction)

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of token ids, special tokens dropped."""
        return self.codec.decode(token_ids)

    @property
    def model(self) -> torch.nn.Module:
        """The torch module served now (read it, do not swap it: `update_weights` does that under the lock)."""
        return self._model

    @property
    def vocab_size(self) -> int:
        """Number of token ids the model accepts (ids must lie in [0, vocab_size))."""
        weight = hf_model(self._model).get_input_embeddings().weight
        assert isinstance(weight, torch.Tensor)  # a Parameter
        return int(weight.shape[0])

    def weight_version(self) -> str:
        """The policy version of the weights served now."""
        return self._version

    def close(self) -> None:
        """Nothing to release here: the model and its caches are Python objects, freed with the engine (the method
        exists so every engine is closed the same way)."""

    def model_info(self) -> dict[str, object]:
        """What is loaded: path, weight version, prompt form, device, dtype."""
        dtype = str(self.dtype).removeprefix("torch.") + (" + int8 Linear" if self.int8_linear else "")
        notes = (["per channel"] if self.int8_linear and self.int8_per_channel else []) + (
            [f"float32: {', '.join(self.int8_keep_float)}"] if self.int8_linear and self.int8_keep_float else [])
        if notes:
            dtype += f" ({'; '.join(notes)})"
        return {"model_path": self._model_path, "weight_version": self._version, "prompt_form": self.prompt_form,
                "device": str(self.device), "dtype": dtype}

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[list[Completion]]:
        """For each prompt, `sampling.n` completions, in prompt order. Never aborts (no abort event)."""
        batches, version = self.sample(prompts, sampling)
        return [[Completion(prompt_index=index, text=s.text, output_ids=s.output_ids, logprobs=s.logprobs,
                            finish_reason="length" if s.finish_reason == "length" else "stop",
                            weight_version=version) for s in samples]
                for index, samples in enumerate(batches)]

    def sample(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams,
               abort: threading.Event | None = None,
               seeds: Sequence[int | None] | None = None) -> tuple[list[list[RawSample]], str]:
        """Raw samples per prompt (n each) and the weight version that made them. With `abort` set mid-way the
        unfinished samples come back with finish_reason `abort` (the HTTP server's pause uses this).

        `seeds`: one seed (or None: the engine's generator) per sample, prompt-major; by default
        `sample_seeds(sampling.seed, ...)`."""
        if not prompts:
            return [], self._version
        n = sampling.n
        seeds = list(seeds) if seeds is not None else sample_seeds(sampling.seed, len(prompts), n)
        if len(seeds) != len(prompts) * n:
            raise ValueError(f"{len(seeds)} sample seeds for {len(prompts)} prompts x n={n}")
        spec = RowSpec(max_new_tokens=sampling.max_new_tokens, temperature=sampling.temperature,
                       top_p=sampling.top_p, top_k=sampling.top_k, stop=tuple(sampling.stop))
        per_batch = max(1, self.max_batch_rows // n)  # prompts per batch; each brings n rows
        with self._lock:
            flat: list[RawSample] = []
            for start in range(0, len(prompts), per_batch):
                rows = seeds[start * n:(start + per_batch) * n]
                generator: torch.Generator | list[torch.Generator | None] = self._generator
                if any(seed is not None for seed in rows):
                    generator = [self._generator if seed is None else
                                 torch.Generator(device=self.device).manual_seed(seed) for seed in rows]
                flat += decode_rows(self._model, prompts[start:start + per_batch], spec, repeats=n,
                                    eos_ids=self._eos_ids,
                                    detokenize=self.codec.decode, generator=generator, abort=abort,
                                    on_step=self.on_decode_step, before_forward=self.before_forward)
            version = self._version
        return [flat[i * sampling.n:(i + 1) * sampling.n] for i in range(len(prompts))], version

    def update_weights(self, model_path: str, policy_version: int) -> None:
        """Serve the checkpoint at `model_path` (an HF dir from save_pretrained) as `policy_version`. The load
        happens before taking the lock, so generation continues meanwhile; a failed load changes nothing."""
        model = self._load(model_path, progress_bar=False)
        with self._lock:
            self._model = model
            self._model_path = str(model_path)
            self._version = str(policy_version)
            self._eos_ids = self.codec.eos_token_ids() | self._config_eos_ids(model)
        del model
        release_free_memory()  # the replaced model and the export's cyclic garbage (~1.8 GB a step otherwise)

    def forward_logprobs(self, prompt: Sequence[int], output_ids: Sequence[int], temperature: float = 1.0
                         ) -> list[float]:
        """Log-probabilities of `output_ids` after `prompt` from one teacher-forced forward pass, scaled by
        `temperature` like the sampler's (1.0 = the plain model). What a trainer recomputes; used by tests."""
        ids = torch.tensor([list(prompt) + list(output_ids)], device=self.device)
        with self._lock, torch.inference_mode():
            logits = self._model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
        scale = temperature if temperature > 0 else 1.0
        logprobs = torch.log_softmax(logits / scale, dim=-1)
        targets = torch.tensor(list(output_ids), device=self.device).unsqueeze(-1)
        return logprobs.gather(-1, targets).squeeze(-1).tolist()
