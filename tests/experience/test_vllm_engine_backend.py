"""The in-process vLLM engine backend: configuration, and the smoke model answering a batch under its schema."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import types
from pathlib import Path

import pytest

from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import ConfigError
from dreamgym_env.experience.backends.base import CompletionRequest
from dreamgym_env.experience.backends.vllm_engine import VLLMEngineBackend
from dreamgym_env.experience.schema import ExperienceOutput, output_json_schema
from dreamgym_env.serving import SMOKE_SERVER_ARGS, default_engine_env
from tests._grammar import answer_token_bound

CAPS = dict(max_reasoning_chars=20, max_state_chars=40, max_actions=2, max_action_chars=20)


def test_engine_arguments_come_from_extra_body():
    config = BackendConfig(
        backend="vllm", model="/models/m", temperature=0.0, max_tokens=64, extra_body={"dtype": "bfloat16"}
    )
    backend = VLLMEngineBackend.from_config(config)
    assert backend.engine_kwargs == {"dtype": "bfloat16"} and backend.max_tokens == 64
    assert backend.describe() == "vllm.LLM(/models/m)"
    with pytest.raises(ConfigError, match="model="):
        VLLMEngineBackend("")


def _restore_engine_env_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine sets its defaults in the process environment; undo that when the test ends."""
    for key in [*default_engine_env(), "VLLM_WORKER_MULTIPROC_METHOD"]:
        absent = key not in os.environ
        monkeypatch.setenv(key, os.environ.get(key, ""))
        if absent:
            monkeypatch.delenv(key)


def test_the_engine_starts_with_the_package_environment_where_the_process_sets_none(monkeypatch):
    seen: dict[str, str | None] = {}

    class FakeLLM:
        def __init__(self, model: str, **kwargs):
            for key in ("VLLM_WORKER_MULTIPROC_METHOD", "VLLM_CPU_KVCACHE_SPACE", "HF_HUB_OFFLINE"):
                seen[key] = os.environ.get(key)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM))
    _restore_engine_env_after(monkeypatch)
    for key in ("VLLM_WORKER_MULTIPROC_METHOD", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")  # the user's choice stays
    backend = VLLMEngineBackend("/models/m").start()
    # spawned, not forked from a process whose torch thread pools already ran
    assert seen == {
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "VLLM_CPU_KVCACHE_SPACE": "3",
        "HF_HUB_OFFLINE": "1",
    }
    assert isinstance(backend._llm, FakeLLM)


@pytest.mark.integration
def test_started_engine_answers_a_concurrent_batch_in_the_schema(smoke_model_dir: Path, monkeypatch):
    pytest.importorskip("vllm")
    _restore_engine_env_after(monkeypatch)
    structured = json.loads(SMOKE_SERVER_ARGS[SMOKE_SERVER_ARGS.index("--structured-outputs-config") + 1])
    backend = VLLMEngineBackend(
        str(smoke_model_dir),
        temperature=0.0,
        max_tokens=answer_token_bound(**CAPS),  # every answer the grammar admits fits
        max_model_len=4096,
        dtype="float32",
        enforce_eager=True,
        structured_outputs_config=structured,
    )
    assert backend.start() is backend and backend._llm is not None  # before any request
    schema = output_json_schema(**CAPS)
    requests = [
        CompletionRequest(
            messages=[{"role": "user", "content": f"State: room {i}. Action: look"}], json_schema=schema
        )
        for i in range(4)
    ]

    async def ask() -> list:
        return await asyncio.gather(*(backend.acomplete(r) for r in requests))

    completions = asyncio.run(ask())
    assert len(completions) == 4 and all(c.endpoint == "in-process" for c in completions)
    for completion in completions:
        assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
        assert completion.extra["finish_reason"] == "stop", completion.text
        ExperienceOutput.model_validate(json.loads(completion.text, strict=False))
    assert len({c.latency_s for c in completions}) == 1  # one engine batch
    # A request with no schema is decoded freely (a plain-text state answer): no grammar, any text.
    plain = CompletionRequest(messages=requests[0].messages, json_schema=None)
    free = asyncio.run(backend.acomplete(plain))
    assert free.completion_tokens > 0 and free.extra["finish_reason"] in ("stop", "length")
    engine_core = backend._llm.llm_engine.engine_core
    asyncio.run(backend.aclose())
    assert backend._llm is None and not engine_core.resources.engine_manager.processes[0].is_alive()
