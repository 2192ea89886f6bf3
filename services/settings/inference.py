"""The inference engine: which one generates (SGLang servers or an engine in this process), the model, and each
engine's knobs."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr

from services.settings.section import SettingsSection


class InferenceSettings(SettingsSection):
    """What generates the rollouts and with which weights; the process's device and threads are the run's."""

    RESUMED: ClassVar[frozenset[str]] = frozenset({
        "model", "local_engine_dtype", "local_engine_int8", "local_engine_int8_keep_float",
        "local_engine_int8_per_channel"})

    inference_backend: Literal["local", "sglang"] = "local"
    """Local transformers engine (embedded) or SGLang servers over HTTP (distributed)."""
    model: str = "qwen-coder-0.5b"
    """Model: a preset (`qwen-coder-0.5b`, `smollm2`, `tiny`), a Hugging Face hub id (`Org/Name`, read offline from
    the local HF cache: HF_HUB_CACHE, else HF_HOME/hub), or a path to a Hugging Face model directory."""
    sglang_urls: list[str] = Field(default_factory=lambda: ["http://127.0.0.1:30000"])
    """SGLang server (or router) base URLs; requests are load-balanced across them."""
    sglang_request_timeout_s: float = Field(600.0, gt=0)
    """HTTP timeout of one `/generate` request, i.e. one chunk of `sglang_max_rows_per_request` samples; a chunk that
    times out is resent alone (up to the client's retries), never the whole batch."""
    sglang_max_rows_per_request: int = Field(64, ge=1)
    """Most samples (rows: prompts x n) one `/generate` request carries: a batch is split into chunks of this many,
    so a timeout, a 5xx or a restarted server costs one chunk, and the chunks spread over the servers."""
    sglang_max_concurrent_requests: int = Field(16, ge=1)
    """`/generate` requests one generate call keeps in flight at once, round-robin over the healthy servers (SGLang
    batches concurrent requests continuously, so this feeds every server without sending one huge request)."""
    sglang_admin_api_key: SecretStr | None = None
    """The servers' `--admin-api-key`: SGLang then accepts its control endpoints (update_weights_from_disk,
    pause_generation, continue_generation, flush_cache, abort_request) only with `Authorization: Bearer <key>`, which
    the trainer sends; generation and /model_info stay open. None: servers started without one."""
    sglang_resume_aborted: bool = True
    """Resume samples a weight push aborted (AReaL's partial rollouts) instead of starting them again: the client
    re-posts prompt + the tokens generated so far with `max_new_tokens` reduced, and joins the pieces into one sample
    tagged with the OLDEST weight version it contains. Why this is sound: the trainer recomputes pi_old with its own
    weights, so a sample spanning two policy versions is still a valid (near on-policy) sample, and its oldest
    version keeps the staleness filter conservative; off, every push throws away the tokens in flight."""
    sglang_max_resumes: int = Field(3, ge=0)
    """Most times one sample is resumed; aborted once more, it starts again from its prompt (the behaviour with
    `sglang_resume_aborted` off)."""
    local_engine: Literal["auto", "torch", "llama-cpp"] = "torch"
    """Which in-process engine generates (`inference_backend = local`): `llama-cpp` (llama.cpp's quantized CPU
    kernels through llama-cpp-python, services/inference/llama_cpp_engine.py: the released 4-bit weights, 0.012
    nats per token from the trainer's float32 against the int8 torch engine's 0.12; docs/embedded-run.md), `torch`
    (transformers, services/inference/local_engine.py: CUDA, and the fallback), or `auto`: llama.cpp on a CPU
    where llama-cpp-python is installed (`make engine`), else torch, saying why. Not in the paper (its engine is
    vLLM on GPUs). The embedded profile defaults to `auto`."""
    local_engine_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Weights dtype of the local engine (generation only; the trainer keeps float32 weights and recomputes π_old, so
    the loss does not depend on it): `auto` = bfloat16 on CUDA and on CPUs with native bf16 (AVX512-BF16/AMX: ~2.2x
    faster prefill, 1.1-1.4x faster decoding on 2 cores, docs/benchmarks.md), float32 on other CPUs (emulated bf16
    is slower). AZR_CPU_NATIVE_BF16=1/0 makes any CPU take either path."""
    local_engine_int8: bool = False
    """CPU only: the local engine generates with its Linear layers quantized to int8 (weights per tensor, activations
    per batch, torch's dynamic quantization), on top of `local_engine_dtype` float32. Decoding is matrix products,
    and int8 ones run several times faster on CPUs without native bf16 (docs/benchmarks.md, bench/step_generation.py);
    the sampled tokens come from another distribution (KL ~0.002 nats at the argmax, but a mean |Δ log p| of 0.18-0.3
    per sampled token on the default model): the trainer recomputes π_old with its float32 weights, and
    `behaviour_is_cap` corrects the update for the mismatch. Off by default; the learning preset turns both on."""
    local_engine_int8_keep_float: list[str] = Field(default_factory=list)
    """With `local_engine_int8`: Linear layers whose names end in one of these (at a dot) stay float32, e.g.
    `["down_proj"]` or one layer's `["layers.2.mlp.down_proj"]`. The MLP down projections' inputs carry the model's
    few huge activations, and dynamic quantization takes one activation scale per batch: on the default model's own
    sampled tokens every Linear int8 is 0.64-0.80 nats per token from float32, 0.23 with every `down_proj` float32
    and 0.29 with the 8 most outlying of 24; the LM head makes no difference (bench/engine_gap.py ranks the
    layers)."""
    local_engine_int8_per_channel: bool = False
    """With `local_engine_int8`: one int8 scale per output channel of each weight instead of one per tensor (torch's
    `per_channel_dynamic_qconfig`); activations stay one scale per batch. Measured on the default model's own sampled
    tokens in docs/benchmarks.md (bench/engine_gap.py --per-channel)."""
    llama_cpp_base: Literal["release", "q8_0", "q4_0", "f16"] = "release"
    """How the llama.cpp engine holds the base model: `release` = the model's GGUF as shipped (Q4_K_M; the trainer's
    base is its exact dequantization, so the engine/trainer gap is the kernels' rounding only), or requantized once
    to `q8_0` / `q4_0` / `f16` (other speed, more gap: docs/benchmarks.md, bench/engine_compare.py). Models without a
    GGUF release are written in float32 from their HF directory."""
    llama_cpp_context_tokens: int = Field(65536, ge=256)
    """KV cache cells of the llama.cpp engine in all: each row of a batch gets a stream of (its wave's longest prompt +
    max_new_tokens) cells, and rows that do not fit are decoded in later waves. 65,536 cells: 0.8 GB (0.5B) / 1.8 GB
    (1.5B) at most."""
    llama_cpp_sequences: int = Field(64, ge=1, le=256)
    """Most rows (samples) the llama.cpp engine decodes together (llama.cpp's limit: 256)."""
