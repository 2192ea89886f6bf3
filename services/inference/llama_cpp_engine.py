"""`LlamaCppEngine`: the InferenceEngine port over llama.cpp in this process (the CPU engine of the embedded run).

Why: on 2 CPU cores generation is most of a step, and llama.cpp's quantized kernels decode a batch of rows several
times faster than the torch engine (docs/benchmarks.md, bench/engine_compare.py). The contract is the torch engine's
(`services.inference.local_engine.LocalEngine`): the same tokenizer and chat template (the transformers tokenizer of
the model's HF directory tokenizes and detokenizes; llama.cpp only sees token ids), the same sampler and behaviour
log-probabilities (`services.inference.sampling`, on llama.cpp's logits), per-sample seeds, EOS and stop rules.

Weights: the base model is a GGUF file (a release's own Q4_K_M bytes, or requantized once to `q8_0` / `q4_0`, or
written in float from an HF directory: `llama_cpp_base`). A push (`update_weights`) is either
- a PEFT adapter directory (the trainer's push with LoRA): converted to a llama.cpp LoRA GGUF (~0.1 s) and applied on
  top of the base; the trainer's own base is the same dequantized release, so with `release` the engine/trainer gap
  is the kernels' rounding only; or
- a full HF directory (full fine-tuning): written as a float GGUF, requantized like the base, and loaded in place of
  the model (seconds to a minute: the slow path).

Thread safety: one lock serialises generation and weight swaps; a new adapter or model is prepared outside it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from services.inference.chat_codec import PromptCodec, PromptForm
from services.inference.decoding import DecodeProgress, RawSample, RowSpec
from services.inference.engine_scratch import EngineScratch
from services.inference.generation_hooks import NO_HOOKS, GenerationHooks
from services.inference.gguf_export import gguf_architecture, write_lora_gguf, write_model_gguf
from services.inference.llama_cpp_decoding import decode_rows_llama
from services.inference.llama_cpp_runtime import LlamaContext, LlamaModel, LoraAdapter, Token, quantize
from services.inference.sampling import sample_seeds
from services.json_types import JsonObject
from services.ports import Completion, InferenceError, SamplingParams

INITIAL_WEIGHT_VERSION = "0"
SCRATCH_DIR_NAME = ".engine-scratch"
"""Under the work directory: one scratch directory per engine (`services.inference.engine_scratch`)."""
BASE_FORMS = ("release", "q8_0", "q4_0", "f16")
"""How the base is served: the GGUF as given, or requantized once (cached beside it)."""


def served_base(gguf: Path, form: str, work_dir: Path, threads: int) -> Path:
    """The GGUF the engine loads for base ``gguf`` served as ``form`` (requantized once into ``work_dir``)."""
    if form == "release":
        return gguf
    if form not in BASE_FORMS:
        raise InferenceError(f"unknown llama_cpp_base {form!r} (one of {', '.join(BASE_FORMS)})")
    target = work_dir / f"{gguf.stem}.{form}.gguf"
    if not target.is_file():
        work_dir.mkdir(parents=True, exist_ok=True)
        quantize(gguf, target, form, threads)
    return target


class LlamaCppEngine:
    """Generates with llama.cpp in this process; implements `services.ports.InferenceEngine`."""

    def __init__(self, model_dir: str | Path, gguf: str | Path | None, *, base_form: str = "release", seed: int = 0,
                 context_tokens: int = 65536, max_sequences: int = 64, batch_tokens: int = 512,
                 threads: int = 2, work_dir: str | Path | None = None, scratch_root: str | Path | None = None,
                 hooks: GenerationHooks = NO_HOOKS) -> None:
        """``model_dir``: the model's HF directory (tokenizer, chat template, config); ``gguf``: its weights as GGUF
        (the same model: a release and its conversion, or a GGUF written from the directory), or None to have the
        engine write one into its own scratch directory (a run's checkpoint: removed with the engine).
        ``work_dir`` keeps requantized bases (default: beside the GGUF); ``scratch_root`` holds the engine's scratch
        directory (`services.inference.engine_scratch`; default: ``work_dir``/.engine-scratch). ``hooks``: its
        decoding-step and thread-count callbacks."""
        self.model_dir = Path(model_dir)
        self.config: JsonObject = json.loads((self.model_dir / "config.json").read_text())
        if scratch_root is None:
            if work_dir is None and gguf is None:
                raise ValueError("an engine that converts its own base needs a work_dir or a scratch_root")
            scratch_root = Path(work_dir if work_dir is not None else Path(str(gguf)).parent) / SCRATCH_DIR_NAME
        self.scratch = EngineScratch(Path(scratch_root))
        try:
            if gguf is None:
                gguf = write_model_gguf(self.model_dir, self.scratch.path / "base.gguf", dtype="f32")
            self.base_gguf = Path(gguf)
            self.base_form = base_form
            self.work_dir = Path(work_dir) if work_dir is not None else self.base_gguf.parent
            self.threads = threads
            self.context_tokens, self.max_sequences, self.batch_tokens = context_tokens, max_sequences, batch_tokens
            self.codec = PromptCodec.from_model_dir(self.model_dir)
            self.architecture, self.blocks = gguf_architecture(self.base_gguf)
            self._served = served_base(self.base_gguf, base_form, self.work_dir, threads)
            self._model = LlamaModel(self._served)
        except BaseException:
            self.scratch.remove()
            raise
        self._context: LlamaContext | None = None  # the last wave's cache, reused while large enough
        self._adapter: LoraAdapter | None = None
        self._full_pushes = 0
        self._model_path = str(self.model_dir)
        self._version = INITIAL_WEIGHT_VERSION
        self._lock = threading.Lock()
        self._generator = torch.Generator().manual_seed(seed)
        self._eos_ids = self.codec.eos_token_ids() | _config_eos_ids(self.model_dir)
        self.on_decode_step: Callable[[DecodeProgress], None] | None = hooks.on_decode_step
        """Called after every decoding step (a live progress display)."""
        self.generation_threads: Callable[[], int] | None = hooks.generation_threads
        """Asked before every forward how many threads to use (the embedded run: fewer while sandbox jobs run)."""

    def _context_for(self, rows: int, cells: int) -> LlamaContext:
        """A cleared cache of at least `rows` streams of `cells` cells, with the served adapter: the cached one
        when large enough, else a new one as large as both (within `context_tokens`). Called under the lock."""
        old = self._context
        if old is not None and old.max_sequences >= rows and old.cells_per_sequence >= cells:
            old.clear()
            return old
        want_rows, want_cells = rows, cells
        if old is not None and max(rows, old.max_sequences) * max(cells, old.cells_per_sequence) <= self.context_tokens:
            want_rows, want_cells = max(rows, old.max_sequences), max(cells, old.cells_per_sequence)
        if old is not None:
            old.close()
            self._context = None
        context = LlamaContext(self._model, sequences=want_rows, cells_per_sequence=want_cells,
                               batch_tokens=self.batch_tokens, threads=self.threads)
        if self._adapter is not None:
            context.set_adapter(self._adapter)
        self._context = context
        return context

    # ------------------------------------------------------------------------------------------ port methods

    @property
    def prompt_form(self) -> PromptForm:
        return self.codec.form

    def prompt_ids(self, instruction: str) -> list[int]:
        return self.codec.prompt_ids(instruction)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.codec.decode(token_ids)

    @property
    def vocab_size(self) -> int:
        return self._model.vocab_size

    def weight_version(self) -> str:
        return self._version

    def model_info(self) -> dict[str, object]:
        """What is loaded: path, weight version, prompt form, device, and the weights' form."""
        dtype = f"llama.cpp {self.base_form} base"
        if self._adapter is not None:
            dtype += " + LoRA adapter"
        return {"model_path": self._model_path, "weight_version": self._version, "prompt_form": self.prompt_form,
                "device": "cpu", "dtype": dtype, "gguf": str(self._served)}

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams) -> list[list[Completion]]:
        batches, version = self.sample(prompts, sampling)
        return [[Completion(prompt_index=index, text=s.text, output_ids=s.output_ids, logprobs=s.logprobs,
                            finish_reason="length" if s.finish_reason == "length" else "stop",
                            weight_version=version) for s in samples]
                for index, samples in enumerate(batches)]

    def sample(self, prompts: Sequence[Sequence[int]], sampling: SamplingParams,
               abort: threading.Event | None = None,
               seeds: Sequence[int | None] | None = None) -> tuple[list[list[RawSample]], str]:
        """Raw samples per prompt (n each) and the weight version that made them (`LocalEngine.sample`'s
        contract: `seeds`, one per sample, prompt-major, default `sample_seeds(sampling.seed, ...)`)."""
        if not prompts:
            return [], self._version
        n = sampling.n
        seeds = list(seeds) if seeds is not None else sample_seeds(sampling.seed, len(prompts), n)
        if len(seeds) != len(prompts) * n:
            raise ValueError(f"{len(seeds)} sample seeds for {len(prompts)} prompts x n={n}")
        vocab = self._model.vocab_size
        if any(not 0 <= token < vocab for prompt in prompts for token in prompt):
            raise InferenceError(f"a prompt holds a token id outside [0, {vocab})")
        spec = RowSpec(max_new_tokens=sampling.max_new_tokens, temperature=sampling.temperature,
                       top_p=sampling.top_p, top_k=sampling.top_k, stop=tuple(sampling.stop))
        with self._lock:
            generator: torch.Generator | list[torch.Generator | None] = self._generator
            if any(seed is not None for seed in seeds):
                generator = [self._generator if seed is None else torch.Generator().manual_seed(seed)
                             for seed in seeds]
            flat = decode_rows_llama(self._context_for, prompts, spec, repeats=n, eos_ids=self._eos_ids,
                                     detokenize=self.codec.decode, generator=generator,
                                     context_tokens=self.context_tokens, max_sequences=self.max_sequences,
                                     abort=abort, on_step=self.on_decode_step, threads=self.generation_threads)
            version = self._version
        return [flat[i * n:(i + 1) * n] for i in range(len(prompts))], version

    def update_weights(self, model_path: str, policy_version: int) -> None:
        """Serve the push at ``model_path`` as ``policy_version``: a PEFT adapter directory (applied over the base)
        or a full HF directory (loaded in place of the model). A failed load changes nothing."""
        path = Path(model_path)
        if (path / "adapter_config.json").is_file():
            self._take_adapter(path, policy_version)
        elif (path / "config.json").is_file():
            self._take_model(path, policy_version)
        else:
            raise InferenceError(f"no HF model directory or PEFT adapter directory at {path}")

    def _take_adapter(self, path: Path, policy_version: int) -> None:
        base_record = path / "lora_base.json"
        if base_record.is_file():
            base = Path(json.loads(base_record.read_text())["base_model_dir"])
            if base.resolve() != self.model_dir.resolve():
                raise InferenceError(f"the adapter at {path} was trained on {base}, this engine serves "
                                     f"{self.model_dir}")
        if self._served_full_weights():
            raise InferenceError("an adapter cannot be applied: the engine serves full fine-tuned weights")
        with tempfile.TemporaryDirectory(dir=self.work_dir, prefix=".adapter-") as staging:
            gguf = write_lora_gguf(path, Path(staging) / "adapter.gguf", architecture=self.architecture,
                                   blocks=self.blocks, model_config=self.config)
            adapter = self._model.load_adapter(gguf)  # read into llama.cpp's buffers: the file can go
        with self._lock:
            try:
                if self._context is not None:
                    self._context.set_adapter(adapter)
            except InferenceError:
                self._model.free_adapter(adapter)
                raise
            old, self._adapter = self._adapter, adapter
            self._model_path, self._version = str(path), str(policy_version)
        if old is not None:
            self._model.free_adapter(old)

    def _served_full_weights(self) -> bool:
        return self._model.path != self._served

    def _take_model(self, path: Path, policy_version: int) -> None:
        """Load a full-weight push from a GGUF of it in the scratch directory; the file it replaces goes."""
        self._full_pushes += 1  # the file's name: versions are any string on the HTTP server's side
        target = self.scratch.path / f"push-{self._full_pushes:06d}.gguf"
        with tempfile.TemporaryDirectory(dir=self.scratch.path, prefix=".staging-") as staging:
            written = write_model_gguf(path, Path(staging) / "model.gguf", dtype="f32", tokenizer_dir=self.model_dir)
            if self.base_form in ("q8_0", "q4_0", "f16"):
                written = quantize(written, Path(staging) / f"model.{self.base_form}.gguf", self.base_form,
                                   self.threads)
            shutil.move(str(written), target)
        try:
            model = LlamaModel(target)
        except InferenceError:
            target.unlink(missing_ok=True)
            raise
        with self._lock:
            old_model, old_context, old_adapter = self._model, self._context, self._adapter
            self._model, self._context, self._adapter = model, None, None
            self._model_path, self._version = str(path), str(policy_version)
            self._eos_ids = self.codec.eos_token_ids() | _config_eos_ids(path)
        if old_context is not None:
            old_context.close()
        if old_adapter is not None:
            old_model.free_adapter(old_adapter)
        old_model.close()
        if self.scratch.holds(old_model.path):  # push files are numbered: never the one just loaded
            old_model.path.unlink(missing_ok=True)

    def forward_logprobs(self, prompt: Sequence[int], output_ids: Sequence[int], temperature: float = 1.0
                         ) -> list[float]:
        """Log-probabilities of ``output_ids`` after ``prompt``, teacher-forced through the served weights, scaled
        by ``temperature`` like the sampler's. What the engine/trainer gap is measured with (bench, tests)."""
        ids = list(prompt) + list(output_ids)
        rows: list[np.ndarray] = []
        with self._lock:
            context = self._context_for(1, len(ids) + 1)
            for start in range(0, len(ids), self.batch_tokens):
                chunk = [Token(ids[p], p, 0, p >= len(prompt) - 1 and p < len(ids) - 1)
                         for p in range(start, min(start + self.batch_tokens, len(ids)))]
                rows.append(context.decode(chunk))
            context.clear()
        logits = torch.from_numpy(np.concatenate(rows))
        scale = temperature if temperature > 0 else 1.0
        logprobs = torch.log_softmax(logits / scale, dim=-1)
        return logprobs.gather(-1, torch.tensor(list(output_ids)).unsqueeze(-1)).squeeze(-1).tolist()

    def close(self) -> None:
        """Free the cache and the model and remove the engine's own files (its converted base, its pushes)."""
        with self._lock:
            if self._context is not None:
                self._context.close()
                self._context = None
            self._model.close()
            self.scratch.remove()


def _config_eos_ids(model_dir: Path) -> set[int]:
    """EOS ids from the directory's generation config (Qwen instruct models list <|im_end|> and <|endoftext|>)."""
    path = Path(model_dir) / "generation_config.json"
    if not path.is_file():
        return set()
    eos = json.loads(path.read_text()).get("eos_token_id")
    if eos is None:
        return set()
    return {int(e) for e in eos} if isinstance(eos, list) else {int(eos)}
