"""The InferenceEngine port's adapters (services.ports.InferenceEngine), the models they load and the CPU server.

- `model_registry.resolve_model`: `tiny`, `qwen-coder-0.5b`, `smollm2`, a hub id from the local HF cache or a path
  -> an HF model directory; `tiny_model` builds the random `tiny` model offline; `prepared_model.prepared_model_dir`
  is the served model's directory as the model-prep step left it, for processes that only tokenize.
- `chat_codec.PromptCodec`: instruction -> prompt token ids (chat template or plain R1 text), ids -> text.
- `local_engine.LocalEngine`: transformers in this process (embedded profile); sampling arithmetic in `sampling`,
  the decoding loop in `decoding`.
- `sglang_client.SGLangClient`: SGLang servers over HTTP (distributed profile); wire shapes in `sglang_schemas`, the
  control plane (weight push, `/model_info`, `/health`) in `sglang_control`.
- `sglang_server.create_inference_app`: `azr serve inference`, SGLang's wire format over a LocalEngine; its pause,
  abort and in-flight bookkeeping in `generation_gate`.
- `causal_lm.hf_model`: a loaded model as the transformers model it is, for the type checker.
- `heartbeat`: a line every few seconds while a long conversion or copy of a model runs.
"""
