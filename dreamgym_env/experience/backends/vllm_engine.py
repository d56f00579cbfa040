"""An in-process ``vllm.LLM`` engine, for offline batch use without an HTTP server.

Concurrent ``acomplete`` calls (a vector env's sub-envs) are gathered into one ``LLM.chat`` batch, so the
engine schedules them together as the server would. The engine is created on first use, in a worker
thread, with this package's engine environment
(:func:`~dreamgym_env.experience.backends.vllm_settings.default_engine_env`) wherever the process
environment does not choose. vLLM's engine processes are started with
``spawn``: forked from a process that already ran torch's thread pools (a test run, a training
script), the CPU worker can fail to start. Scripts using this backend need an
``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import BackendError, ConfigError, DependencyNotInstalled, PromptTooLongError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest
from dreamgym_env.experience.backends.vllm_settings import PREFIX_BLOCK_SIZE, default_engine_env

ENGINE_SHUTDOWN_TIMEOUT_S = 30.0
"""How long a closed engine gets to finish on its own before vLLM kills it (vLLM's default is 5 s, which
an engine on a loaded CPU can outlast)."""


@dataclass
class _Pending:
    request: CompletionRequest
    future: asyncio.Future[Completion]


class VLLMEngineBackend(Backend):
    """Structured-output generation with an in-process vLLM engine.

    Args:
        model: A model directory or hub name (``vllm.LLM(model=...)``).
        temperature, top_p, max_tokens: Sampling settings, as for the HTTP backend.
        batch_window_s: How long the first request of a batch waits for others to join.
        send_seed: Use each request's seed for sampling (see ``BackendConfig.send_seed``).
        logprobs: Report each answer's mean token log-probability (see ``BackendConfig.logprobs``).
        engine_kwargs: Passed to ``vllm.LLM`` (``max_model_len``, ``dtype``, ``tensor_parallel_size``...);
            ``block_size`` defaults to the servers'
            (:data:`~dreamgym_env.experience.backends.vllm_settings.PREFIX_BLOCK_SIZE`).
    """

    def __init__(
        self,
        model: str,
        *,
        temperature: float = 0.7,
        top_p: float = 1.0,
        max_tokens: int = 1024,
        batch_window_s: float = 0.002,
        send_seed: bool = False,
        logprobs: bool = False,
        **engine_kwargs: Any,
    ) -> None:
        if not model:
            raise ConfigError("The vllm backend needs model=<model directory or name>.")
        self.model = model
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.batch_window_s = batch_window_s
        self.send_seed = send_seed
        self.logprobs = logprobs
        self.engine_kwargs = engine_kwargs
        self._llm: Any = None
        self._engine_lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._flush_scheduled = False

    @classmethod
    def from_config(cls, config: BackendConfig) -> VLLMEngineBackend:
        """Build from a :class:`BackendConfig`; ``extra_body`` entries become engine arguments."""
        return cls(
            config.model,
            temperature=config.temperature,
            top_p=config.top_p,
            max_tokens=config.max_tokens,
            send_seed=config.send_seed,
            logprobs=config.logprobs,
            **config.extra_body,
        )

    def describe(self) -> str:
        """The engine's model."""
        return f"vllm.LLM({self.model})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_llm=None, _engine_lock=None, _pending=[], _flush_scheduled=False)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._engine_lock = threading.Lock()

    async def acomplete(self, request: CompletionRequest) -> Completion:
        """Queue the request; it joins the next engine batch."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Completion] = loop.create_future()
        self._pending.append(_Pending(request, future))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_later(self.batch_window_s, lambda: asyncio.ensure_future(self._flush()))
        return await future

    async def _flush(self) -> None:
        batch, self._pending, self._flush_scheduled = self._pending, [], False
        try:
            completions = await asyncio.to_thread(self._generate, [p.request for p in batch])
        except Exception as e:  # every waiter learns why its batch failed
            for pending in batch:
                if not pending.future.done():
                    pending.future.set_exception(e)
            return
        for pending, completion in zip(batch, completions, strict=True):
            if not pending.future.done():
                pending.future.set_result(completion)

    def start(self) -> VLLMEngineBackend:
        """Create the engine now and return ``self``.

        Otherwise the first step that asks pays the startup: a minute or more on a CPU (weights, KV
        cache and, when compiling, the graphs).
        """
        with self._engine_lock:
            self._engine()
        return self

    async def aclose(self) -> None:
        """Shut the engine's processes down (an env that created this backend does so when closed).

        The next request starts a new engine.
        """
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        with self._engine_lock:
            llm, self._llm = self._llm, None
        if llm is None:
            return
        core = llm.llm_engine.engine_core
        core.shutdown(timeout=ENGINE_SHUTDOWN_TIMEOUT_S)
        # vLLM kills an engine that outlives the timeout without waiting for it to go: reap it here, so
        # the engine's memory and cores are free when this returns.
        manager = getattr(getattr(core, "resources", None), "engine_manager", None)
        for process in getattr(manager, "processes", ()):
            process.join(ENGINE_SHUTDOWN_TIMEOUT_S)

    def _engine(self) -> Any:
        if self._llm is None:
            try:
                import vllm
            except ImportError as e:
                raise DependencyNotInstalled("vllm", "vllm", "The in-process vLLM backend") from e
            # vLLM's settings are environment variables, read when the engine starts.
            for key, value in {**default_engine_env(), "VLLM_WORKER_MULTIPROC_METHOD": "spawn"}.items():
                os.environ.setdefault(key, value)
            self._llm = vllm.LLM(model=self.model, **{"block_size": PREFIX_BLOCK_SIZE, **self.engine_kwargs})
        return self._llm

    def _generate(self, requests: list[CompletionRequest]) -> list[Completion]:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        with self._engine_lock:
            llm = self._engine()
            params = [
                SamplingParams(
                    temperature=self.temperature if r.temperature is None else r.temperature,
                    top_p=self.top_p,
                    max_tokens=self.max_tokens,
                    seed=r.seed if self.send_seed else None,
                    logprobs=0 if self.logprobs else None,  # 0: the sampled token's alone
                    structured_outputs=StructuredOutputsParams(choice=list(r.choices))
                    if r.choices is not None
                    else StructuredOutputsParams(regex=r.pattern)
                    if r.pattern is not None
                    else None
                    if r.json_schema is None
                    else StructuredOutputsParams(json=r.json_schema),
                )
                for r in requests
            ]
            start = time.perf_counter()
            try:
                outputs = llm.chat([r.messages for r in requests], params, use_tqdm=False)
            except ValueError as e:
                if "longer than the maximum model length" in str(e) or "max_model_len" in str(e):
                    raise PromptTooLongError(f"A prompt does not fit {self.model}'s context: {e}") from e
                raise BackendError(f"vLLM engine rejected the batch: {e}") from e
            latency = time.perf_counter() - start
        completions = []
        for out in outputs:
            generated = out.outputs[0]
            completions.append(
                Completion(
                    text=generated.text,
                    prompt_tokens=len(out.prompt_token_ids or []),
                    completion_tokens=len(generated.token_ids),
                    cached_tokens=getattr(out, "num_cached_tokens", None),
                    latency_s=latency,
                    endpoint="in-process",
                    extra={"finish_reason": generated.finish_reason},
                    mean_logprob=_mean_logprob(generated),
                )
            )
        return completions


def _mean_logprob(generated: Any) -> float | None:
    """The mean log-probability of a generated answer's tokens; ``None`` where none was asked for (or generated)."""
    total = getattr(generated, "cumulative_logprob", None)
    count = len(generated.token_ids)
    if total is None or not count or not math.isfinite(total):
        return None
    return min(0.0, total / count)
