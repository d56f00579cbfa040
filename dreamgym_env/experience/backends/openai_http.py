"""Any OpenAI-compatible chat endpoint: vLLM's server first, also SGLang, llama.cpp, hosted APIs.

Timeouts and retries with backoff are the ``openai`` client's own; this module adds what it lacks:
several endpoints with fail-over, a bound on requests in flight, structured output, and errors that
name the URL and the fix.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from dataclasses import dataclass
from typing import Any

import openai
from openai._constants import DEFAULT_CONNECTION_LIMITS, DEFAULT_TIMEOUT

from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import BackendError, ConfigError, PromptTooLongError, ServerUnreachableError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest

__all__ = ["OpenAIBackend"]

_CONTEXT_MARKERS = ("maximum context length", "context length", "too long", "max_model_len")


def _http_client(max_concurrency: int, timeout: Any) -> Any:
    """The default HTTP client of `openai`, keeping a connection alive for every request in flight.

    The default keeps 100: a vector env of more sub-envs closes the surplus after every step and opens
    it again on the next, and against vLLM's server some requests on such fresh connections got no
    answer until the read timeout (a 60 s stall of the whole lock-step step).
    """
    limits = type(DEFAULT_CONNECTION_LIMITS)(
        max_connections=max_concurrency, max_keepalive_connections=max_concurrency
    )
    return openai.DefaultAsyncHttpxClient(limits=limits, timeout=timeout)


@dataclass
class _LoopState:
    clients: list[openai.AsyncOpenAI]
    semaphore: asyncio.Semaphore


class OpenAIBackend(Backend):
    """Structured-output chat completions over HTTP.

    Args:
        config: Endpoints, model, key, timeouts, retries, concurrency and sampling settings.

    Example:
        >>> backend = OpenAIBackend(BackendConfig(base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3-8B"))
    """

    def __init__(self, config: BackendConfig) -> None:
        if not config.model:
            raise ConfigError(
                "No experience model name: pass model=... to gymnasium.make or set DREAMGYM_MODEL to the name "
                f"the server serves (GET {config.base_url[0]}/models lists them)."
            )
        if not config.base_url:
            raise ConfigError("No endpoint: pass base_url=... or set DREAMGYM_BASE_URL.")
        self.config = config
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._turn = itertools.count()

    def describe(self) -> str:
        """Model and endpoints (never the key)."""
        return f"openai({self.config.model} @ {', '.join(self.config.base_url)})"

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            cfg = self.config
            # openai's own HTTP types (httpx or its successor, whichever this openai version uses).
            timeout = type(DEFAULT_TIMEOUT)(cfg.timeout, connect=cfg.connect_timeout)
            clients = [
                openai.AsyncOpenAI(
                    base_url=url,
                    api_key=cfg.api_key.get_secret_value(),
                    timeout=timeout,
                    max_retries=cfg.max_retries,
                    http_client=_http_client(cfg.max_concurrency, timeout),
                )
                for url in cfg.base_url
            ]
            state = _LoopState(clients, asyncio.Semaphore(cfg.max_concurrency))
            self._states[loop] = state
        return state

    def _request_kwargs(self, request: CompletionRequest) -> dict[str, Any]:
        cfg = self.config
        kwargs: dict[str, Any] = {
            "model": cfg.model,
            "messages": request.messages,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": True},
            },
        }
        if cfg.send_seed and request.seed is not None:
            kwargs["seed"] = request.seed
        if cfg.extra_body:
            kwargs["extra_body"] = dict(cfg.extra_body)
        return kwargs

    async def acomplete(self, request: CompletionRequest) -> Completion:
        """Send one request, failing over across endpoints on connection errors."""
        state = self._state()
        kwargs = self._request_kwargs(request)
        n = len(state.clients)
        first = next(self._turn) % n
        failures: list[str] = []
        async with state.semaphore:
            for i in range(n):
                index = (first + i) % n
                url = self.config.base_url[index]
                start = time.perf_counter()
                try:
                    response = await state.clients[index].chat.completions.create(**kwargs)
                except openai.APIConnectionError as e:  # includes APITimeoutError
                    failures.append(f"{url}: {type(e).__name__}: {e}")
                    continue
                except openai.BadRequestError as e:
                    message = str(e)
                    if any(marker in message.lower() for marker in _CONTEXT_MARKERS):
                        raise PromptTooLongError(
                            f"The prompt does not fit the context of {self.config.model} at {url}: {message}. "
                            "Lower history_window or top_k, or serve the model with a larger --max-model-len."
                        ) from e
                    raise BackendError(f"{url} rejected the request: {message}") from e
                except openai.NotFoundError as e:
                    raise BackendError(
                        f"{url} does not serve model {self.config.model!r} ({e}). "
                        f"GET {url}/models lists the served names."
                    ) from e
                except openai.APIStatusError as e:
                    raise BackendError(f"{url} answered HTTP {e.status_code}: {e}") from e
                return _to_completion(response, time.perf_counter() - start, url)
        raise ServerUnreachableError(
            f"Could not reach the experience model at {', '.join(self.config.base_url)} "
            f"(timeout {self.config.timeout:g}s, {self.config.max_retries} retries each). "
            "Start a server (e.g. `vllm serve MODEL` or `dreamgym serve --smoke`) or point base_url / "
            "DREAMGYM_BASE_URL at a running one. Failures: " + "; ".join(failures)
        )

    async def aclose(self) -> None:
        """Close the clients bound to the running loop."""
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None:
            for client in state.clients:
                await client.close()


def _to_completion(response: Any, latency: float, url: str) -> Completion:
    choice = response.choices[0]
    usage = response.usage
    cached = None
    if usage is not None and getattr(usage, "prompt_tokens_details", None) is not None:
        cached = usage.prompt_tokens_details.cached_tokens
    return Completion(
        text=choice.message.content or "",
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        cached_tokens=cached,
        latency_s=latency,
        endpoint=url,
        extra={"finish_reason": choice.finish_reason},
    )
