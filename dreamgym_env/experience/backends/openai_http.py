"""Any OpenAI-compatible chat endpoint: vLLM's server first, also SGLang, llama.cpp, hosted APIs.

Timeouts and retries with backoff are the ``openai`` client's own; this module adds what it lacks:
several endpoints with episode-sticky routing and fail-over, a bound on requests in flight, structured
output, and errors that name the URL and the fix.

Routing: step t+1's prompt extends step t's, so every request of one episode goes to the same endpoint,
the one whose prefix cache holds the episode so far. An episode's first request picks its endpoint by a
stable hash of the episode id (episodes spread evenly, the same way in every process); requests without
an episode take turns. When the endpoint does not answer, the request moves on to the next one, healthy
endpoints first, and the episode stays on the endpoint that answered.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import weakref
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import openai
from openai._constants import DEFAULT_CONNECTION_LIMITS, DEFAULT_TIMEOUT

from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import BackendError, ConfigError, PromptTooLongError, ServerUnreachableError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest

__all__ = ["OpenAIBackend"]

logger = logging.getLogger(__name__)

_CONTEXT_MARKERS = ("maximum context length", "context length", "too long", "max_model_len")
# An endpoint that failed to answer is tried after the healthy ones for this long.
_DOWN_SECONDS = 10.0
# Episodes whose endpoint is remembered; the least recently used are forgotten (they fall back to
# their hash, which is where they started unless they failed over).
_MAX_STICKY_EPISODES = 65_536


def _http_client(max_concurrency: int, timeout: Any, max_retries: int) -> Any:
    """The default HTTP client of `openai`, keeping a connection alive for every request in flight.

    The default keeps 100: a vector env of more sub-envs closes the surplus after every step and opens
    it again on the next, and against vLLM's server some requests on such fresh connections got no
    answer until the read timeout (a 60 s stall of the whole lock-step step).

    The client's retries are openai's own; a request hook logs each one (openai numbers its attempts
    in the ``x-stainless-retry-count`` header). Only the method and URL are logged, never headers.
    """

    async def log_retry(request: Any) -> None:
        retry = request.headers.get("x-stainless-retry-count", "0")
        if retry.isdigit() and int(retry) > 0:
            logger.warning(
                "Retrying %s %s (retry %s of %d): the previous attempt failed or timed out",
                request.method,
                request.url,
                retry,
                max_retries,
            )

    limits = type(DEFAULT_CONNECTION_LIMITS)(
        max_connections=max_concurrency, max_keepalive_connections=max_concurrency
    )
    return openai.DefaultAsyncHttpxClient(
        limits=limits, timeout=timeout, event_hooks={"request": [log_retry]}
    )


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
        self._lock = threading.Lock()
        self._sticky: OrderedDict[str, int] = OrderedDict()  # episode id -> endpoint index
        self._failed_at: dict[int, float] = {}  # endpoint index -> monotonic time of its last failure

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
                    http_client=_http_client(cfg.max_concurrency, timeout, cfg.max_retries),
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

    def _route(self, episode_id: str | None) -> list[int]:
        """Endpoint indices to try, in order: the episode's own (or the next turn) first, down ones last."""
        n = len(self.config.base_url)
        with self._lock:
            if episode_id is None:
                first = next(self._turn) % n
            else:
                first = self._sticky.get(episode_id, zlib.crc32(episode_id.encode()) % n)
            now = time.monotonic()
            down = {i for i, at in self._failed_at.items() if now - at < _DOWN_SECONDS}
        order = [(first + i) % n for i in range(n)]
        return [i for i in order if i not in down] + [i for i in order if i in down]

    def _answered(self, episode_id: str | None, index: int) -> None:
        with self._lock:
            self._failed_at.pop(index, None)
            if episode_id is None:
                return
            self._sticky[episode_id] = index
            self._sticky.move_to_end(episode_id)
            while len(self._sticky) > _MAX_STICKY_EPISODES:
                self._sticky.popitem(last=False)

    def _failed(self, index: int) -> None:
        with self._lock:
            self._failed_at[index] = time.monotonic()

    async def acomplete(self, request: CompletionRequest) -> Completion:
        """Send one request to its episode's endpoint, failing over to the others on connection errors."""
        state = self._state()
        kwargs = self._request_kwargs(request)
        failures: list[str] = []
        route = self._route(request.episode_id)
        async with state.semaphore:
            for position, index in enumerate(route):
                url = self.config.base_url[index]
                start = time.perf_counter()
                try:
                    response = await state.clients[index].chat.completions.create(**kwargs)
                except openai.APIConnectionError as e:  # includes APITimeoutError
                    self._failed(index)
                    failures.append(f"{url}: {type(e).__name__}: {e}")
                    if position + 1 < len(route):
                        then = f"failing over to {self.config.base_url[route[position + 1]]}"
                    else:
                        then = "no endpoint left to try"
                    logger.warning(
                        "Experience model endpoint %s did not answer (%s: %s, after %d retries); %s",
                        url,
                        type(e).__name__,
                        e,
                        self.config.max_retries,
                        then,
                    )
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
                self._answered(request.episode_id, index)
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
