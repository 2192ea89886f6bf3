"""The InferenceEngine port's adapters (services.ports.InferenceEngine).

- `model_registry.resolve_model`: `tiny`, `qwen-coder-0.5b`, `smollm2` or a path -> an HF model directory.
- `chat_codec.PromptCodec`: instruction -> prompt token ids (chat template or plain R1 text), ids -> text.
- `local_engine.LocalEngine`: transformers in this process (embedded profile); sampling arithmetic in `sampling`,
  the decoding loop in `decoding`.
- `sglang_client.SGLangClient`: SGLang servers over HTTP (distributed profile); wire shapes in `sglang_schemas`.
- `sglang_server.create_inference_app`: `azr serve inference`, SGLang's wire format over a LocalEngine.
- `causal_lm.hf_model`: a loaded model as the transformers model it is, for the type checker.
"""
