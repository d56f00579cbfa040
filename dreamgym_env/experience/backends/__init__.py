"""Backends that answer experience-model requests, chosen by name or passed as objects."""

from __future__ import annotations

from dreamgym_env.config import BackendConfig
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest, TransitionQuery

__all__ = ["Backend", "Completion", "CompletionRequest", "TransitionQuery", "make_backend"]


def make_backend(config: BackendConfig) -> Backend:
    """Build the backend named by ``config.backend``; heavy ones import their dependencies here."""
    if config.backend == "openai":
        from dreamgym_env.experience.backends.openai_http import OpenAIBackend

        return OpenAIBackend(config)
    if config.backend == "vllm":
        from dreamgym_env.experience.backends.vllm_engine import VLLMEngineBackend

        return VLLMEngineBackend.from_config(config)
    from dreamgym_env.experience.backends.scripted import ScriptedBackend

    return ScriptedBackend()
