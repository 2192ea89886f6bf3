"""The `tiny` model: a random Qwen2-family causal LM with a byte-level BPE tokenizer trained here, built offline.

Tests and `azr run --model tiny` use it: same architecture family and chat-template shape as the default
Qwen2.5-Coder model, so every code path (chat template, generation, logprobs, training, checkpoints, weight push)
is the real one, only small (~1 M parameters) and untrained. Built deterministically from fixed seeds and a corpus
that ships with the code (the paper's prompt texts and a few programs), so two builds are identical and nothing
is downloaded. Limits: its outputs are noise; it exists to exercise the machinery, not to reason.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

TINY_MODEL_VERSION = 1
"""Bump when the recipe below changes; part of the cache directory name, so old builds are not reused."""

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
"""Qwen2's chat markers: <|im_end|> ends an assistant turn, <|endoftext|> pads."""

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""Qwen2's ChatML template without the default system prompt."""

VOCAB_SIZE = 2048
HIDDEN_SIZE = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
INTERMEDIATE_SIZE = 128
MAX_POSITIONS = 8192

_PROGRAMS = [
    "def f(x):\n    return x",
    "def f(a, b):\n    return sorted([x * b for x in a])[::-1]",
    "def f(s: str) -> str:\n    return ''.join(reversed(s))",
    "def f(nums):\n    total = 0\n    for n in nums:\n        if n % 2 == 0:\n            total += n\n    return total",
    "def f(d):\n    return {k: v for k, v in d.items() if v > 1}",
    "def f(text, sep=','):\n    return [part.strip() for part in text.split(sep)]",
    "import math\n\ndef f(n):\n    return math.factorial(n) % 1000",
    "<think>Let me run the code step by step.</think>\n<answer>\n```python\nf('Hello World')\n```\n</answer>",
    "```input\n[1, 2, 3], 4\n```\n```output\n[12, 8, 4]\n```\n```message\nSort and scale.\n```",
]


def _corpus() -> list[str]:
    """Text the tokenizer is trained on: the paper's prompt texts plus a few programs and answers."""
    from services.algorithm import prompt_texts

    texts = [value for name, value in vars(prompt_texts).items() if isinstance(value, str) and not name.startswith("_")]
    return texts + _PROGRAMS * 4


def _cache_root() -> Path:
    return Path(os.environ.get("AZR_MODEL_CACHE", Path.home() / ".cache" / "azr" / "models"))


def tiny_model_path(cache_root: Path | None = None) -> Path:
    """Where the tiny model's HF directory lives under the cache root (named by its recipe); built or not."""
    recipe = f"{TINY_MODEL_VERSION}:{VOCAB_SIZE}:{HIDDEN_SIZE}:{LAYERS}:{HEADS}:{KV_HEADS}:{INTERMEDIATE_SIZE}"
    digest = hashlib.sha256((recipe + "\0" + "\0".join(_corpus())).encode()).hexdigest()[:12]
    return (cache_root or _cache_root()) / f"tiny-v{TINY_MODEL_VERSION}-{digest}"


def tiny_model_dir(cache_root: Path | None = None) -> Path:
    """The tiny model's HF directory, building it on first use (seconds; atomic, so concurrent builds are safe)."""
    target = tiny_model_path(cache_root)
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-", dir=target.parent))
    build_tiny_model(staging)
    try:
        os.rename(staging, target)
    except OSError:  # another process finished first: theirs is identical
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return target


def build_tiny_model(directory: Path) -> None:
    """Train the tokenizer, initialise the model from seed 0, and save both (safetensors) into `directory`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   model_max_length=MAX_POSITIONS)
    fast.chat_template = CHAT_TEMPLATE

    end_of_text, im_end = fast.convert_tokens_to_ids("<|endoftext|>"), fast.convert_tokens_to_ids("<|im_end|>")
    assert isinstance(end_of_text, int) and isinstance(im_end, int)  # one token each: one id each
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=HIDDEN_SIZE, intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS, tie_word_embeddings=True,
        bos_token_id=end_of_text, eos_token_id=im_end, pad_token_id=end_of_text,
    )
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    fast.save_pretrained(directory)
