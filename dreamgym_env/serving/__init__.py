"""Local model serving: the offline smoke model and a managed vLLM OpenAI-compatible server.

Used by the integration tests, the README demo, benchmarks and ``dreamgym serve --smoke``. Importing
this package is light; torch, transformers and vLLM load only when a model is built or served.
"""

from dreamgym_env.serving.tiny_model import build_tiny_model, default_smoke_model_dir
from dreamgym_env.serving.vllm_server import (
    PREFIX_BLOCK_SIZE,
    SMOKE_MODEL_NAME,
    SMOKE_SERVER_ARGS,
    VLLMServer,
    cpu_dtype,
    default_engine_env,
    find_free_port,
    serve_smoke_model,
)

__all__ = [
    "PREFIX_BLOCK_SIZE",
    "SMOKE_MODEL_NAME",
    "SMOKE_SERVER_ARGS",
    "VLLMServer",
    "build_tiny_model",
    "cpu_dtype",
    "default_engine_env",
    "default_smoke_model_dir",
    "find_free_port",
    "serve_smoke_model",
]
