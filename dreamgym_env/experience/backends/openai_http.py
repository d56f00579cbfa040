"""Any OpenAI-compatible chat endpoint: vLLM's server first, also SGLang, llama.cpp, hosted APIs.

The ``openai`` client makes each HTTP attempt; this module owns the policy around the attempts,
because it spans endpoints: a deadline per attempt and per request, retries with back-off,
fail-over with remembered endpoint health, a bound on requests in flight, structured output, and
errors that name the URL and the fix (never the key).

Deadlines: ``timeout`` bounds one attempt from sending to the last byte (``asyncio.timeout`` around
it, so a server that trickles bytes is cut off; the HTTP client's own timeout is per read), and
``deadline`` bounds the whole request, back-off and fail-over included. A server's ``Retry-After``
is honoured only while it fits in what is left of the deadline.

Client CPU: a simulator sends one request a transition, thousands a second across a vector env, so
the client's own work per request counts. Each attempt posts the body as it is (``client.post``,
openai's way to call an endpoint directly: no walk of the nested JSON schema against the SDK's
parameter types), takes the answer as a plain ``dict`` (no response model built), and rides on openai's
aiohttp transport. Together they cut the client's CPU per transition from 1.8 to 0.9 ms
(``docs/scaling.md``, "Client CPU").

Routing: step t+1's prompt extends step t's, so every request of one episode goes to the same endpoint,
the one whose prefix cache holds the episode so far. An episode's first request picks its endpoint by a
stable hash of the episode id (episodes spread evenly, the same way in every process); requests without
an episode take turns. An attempt that fails (no connection, timeout, HTTP 408/409/429/5xx) moves on to
the next endpoint at once, healthy endpoints first (see :mod:`.health`), and the episode stays on the
endpoint that answered. Once every endpoint was tried, the request waits (back-off) and tries them
again, up to ``max_retries`` times.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import logging
import math
import os
import threading
import time
import weakref
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

import openai

from dreamgym_env._openai_client import (
    REFUSED_HINT,
    api_error,
    async_client,
    close_clients_on,
    connection_failure,
    connection_refused,
)
from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import BackendError, ConfigError, InvalidResponseError, ServerUnreachableError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest
from dreamgym_env.experience.backends.health import EndpointHealth

__all__ = ["OpenAIBackend"]

logger = logging.getLogger(__name__)

# Statuses worth another attempt (elsewhere, or later): the ones openai's own client retries.
_RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_BACKOFF = 8.0
# Episodes whose endpoint is remembered; the least recently used are forgotten (they fall back to
# their hash, which is where they started unless they failed over).
_MAX_STICKY_EPISODES = 65_536


class _Retryable(Exception):
    """An attempt failed in a way another attempt (elsewhere, or later) may not.

    ``refused``: the connection was refused (nothing listened at the endpoint's address).
    """

    def __init__(self, reason: str, retry_after: float | None = None, *, refused: bool = False) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.refused = refused


def _retry_after(headers: Any) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms``, or ``retry-after`` as seconds or a date)."""
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass
class _LoopState:
    clients: list[openai.AsyncOpenAI]
    semaphore: asyncio.Semaphore


class OpenAIBackend(Backend):
    """Structured-output chat completions over HTTP.

    Args:
        config: Endpoints, model, key, deadlines, retries, health cool-down, concurrency and
            sampling settings.

    Example:
        >>> backend = OpenAIBackend(BackendConfig(base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3-8B"))
    """

    def __init__(self, config: BackendConfig) -> None:
        if not config.model:
            raise ConfigError(
                "No experience model name: pass model=... to gymnasium.make or set DREAMGYM_MODEL to the name "
                f"the server serves (GET {config.base_url[0] if config.base_url else 'BASE_URL'}/models lists them)."
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
        self.health = EndpointHealth(config.endpoint_cooldown)
        # A backend garbage-collected, or alive at exit, without aclose() closes its clients quietly.
        weakref.finalize(self, _close_clients, self._states, os.getpid())

    def describe(self) -> str:
        """Model and endpoints (never the key)."""
        return f"openai({self.config.model} @ {', '.join(self.config.base_url)})"

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]

    @property
    def deadline(self) -> float:
        """Seconds one request may take in all: ``config.deadline``, else timeout x (retries + endpoints)."""
        cfg = self.config
        if cfg.deadline is not None:
            return cfg.deadline
        return cfg.timeout * (cfg.max_retries + len(cfg.base_url))

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            cfg = self.config
            clients = [
                async_client(
                    url,
                    api_key=cfg.api_key.get_secret_value(),
                    timeout_s=cfg.timeout,
                    connect_timeout_s=cfg.connect_timeout,
                    max_retries=0,  # retries are this backend's: they may move to another endpoint
                    headers=cfg.endpoint_headers(index),
                    max_connections=cfg.max_concurrency,
                )
                for index, url in enumerate(cfg.base_url)
            ]
            state = _LoopState(clients, asyncio.Semaphore(cfg.max_concurrency))
            self._states[loop] = state
        return state

    def _request_kwargs(self, request: CompletionRequest) -> dict[str, Any]:
        cfg = self.config
        kwargs: dict[str, Any] = {
            "model": cfg.model,
            "messages": request.messages,
            "temperature": cfg.temperature if request.temperature is None else request.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
        }
        if request.json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": True},
            }
        if request.choices is not None:  # vLLM's structured outputs
            kwargs["structured_outputs"] = {"choice": list(request.choices)}
        elif request.pattern is not None:
            kwargs["structured_outputs"] = {"regex": request.pattern}
        if cfg.send_seed and request.seed is not None:
            kwargs["seed"] = request.seed
        if cfg.logprobs:  # each answer token's log-probability, for Completion.mean_logprob
            kwargs["logprobs"] = True
        if cfg.extra_body:
            kwargs.update(cfg.extra_body)
        return kwargs

    def _route(self, episode_id: str | None) -> list[int]:
        """Endpoint indices in rotation order from the episode's own one (or the next turn)."""
        n = len(self.config.base_url)
        with self._lock:
            if episode_id is None:
                first = next(self._turn) % n
            else:
                first = self._sticky.get(episode_id, zlib.crc32(episode_id.encode()) % n)
        return [(first + i) % n for i in range(n)]

    def _answered(self, episode_id: str | None, index: int) -> None:
        self.health.succeeded(index)
        if episode_id is None:
            return
        with self._lock:
            self._sticky[episode_id] = index
            self._sticky.move_to_end(episode_id)
            while len(self._sticky) > _MAX_STICKY_EPISODES:
                self._sticky.popitem(last=False)

    async def acomplete(self, request: CompletionRequest) -> Completion:
        """Send one request within the deadline: its episode's endpoint first, failing over on faults.

        Raises:
            ServerUnreachableError: no endpoint answered before the deadline or the retries ran out.
            PromptTooLongError: the prompt does not fit the model's context.
            InvalidResponseError: the server answered, but not with a chat completion.
            BackendError: the server rejected the request (bad request, unknown model, bad key).
        """
        state = self._state()
        kwargs = self._request_kwargs(request)
        cfg = self.config
        route = self._route(request.episode_id)
        failures: list[str] = []
        all_refused = True  # every failed attempt found nothing listening
        async with state.semaphore:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.deadline
            gave_up = f"every endpoint was tried {cfg.max_retries + 1} time(s)"
            out_of_time = False
            for round_ in range(cfg.max_retries + 1):
                tried: set[int] = set()
                hints: list[float | None] = []
                failed: str | None = None  # the last failure, logged once the next move is known
                while (index := self.health.pick(route, tried)) is not None:
                    tried.add(index)
                    url = cfg.base_url[index]
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        self.health.released(index)
                        out_of_time, gave_up = True, f"the deadline of {self.deadline:g}s passed"
                        break
                    if failed is not None:
                        logger.warning("%s; failing over to %s", failed, url)
                        failed = None
                    try:
                        completion = await self._attempt(state, index, kwargs, min(cfg.timeout, remaining))
                    except _Retryable as e:
                        self.health.failed(index, e.retry_after)
                        failures.append(f"{url}: {e}")
                        all_refused = all_refused and e.refused
                        hints.append(e.retry_after)
                        failed = f"Experience model endpoint {url} failed ({e})"
                        continue
                    except BaseException:
                        self.health.released(index)
                        raise
                    self._answered(request.episode_id, index)
                    return completion
                if round_ == cfg.max_retries or out_of_time:
                    if failed is not None:
                        logger.warning(
                            "%s; %s",
                            failed,
                            "the deadline passed" if out_of_time else "no endpoint left to try",
                        )
                    break
                wait = min(cfg.retry_backoff * 2**round_, _MAX_BACKOFF)
                if hints and all(h is not None for h in hints):  # every endpoint said when to come back
                    wait = max(wait, min(h for h in hints if h is not None))
                left = deadline - loop.time()
                if wait >= left:
                    if failed is not None:
                        logger.warning("%s; no time left for a retry", failed)
                    gave_up = f"a retry in {wait:g}s would end after the deadline ({max(left, 0):.1f}s left)"
                    break
                logger.warning("%s; retry %d of %d in %.1fs", failed, round_ + 1, cfg.max_retries, wait)
                await asyncio.sleep(wait)
        start_one = (
            "Start a server (e.g. `vllm serve MODEL` or `dreamgym serve --smoke`) or point base_url / "
            "DREAMGYM_BASE_URL at a running one."
        )
        if failures and all_refused:
            urls = ", ".join(u for u in cfg.base_url if any(f.startswith(f"{u}: ") for f in failures))
            raise ServerUnreachableError(
                f"The experience model server at {urls} refused the connection: {REFUSED_HINT} "
                f"{start_one} ({gave_up}; failures: {_counted(failures)})"
            )
        raise ServerUnreachableError(
            f"Could not reach the experience model at {', '.join(cfg.base_url)}: {gave_up} "
            f"(timeout {cfg.timeout:g}s an attempt, deadline {self.deadline:g}s a request, "
            f"{cfg.max_retries} retries of each endpoint). {start_one} Failures: {_counted(failures)}"
        )

    async def _attempt(
        self, state: _LoopState, index: int, kwargs: dict[str, Any], limit: float
    ) -> Completion:
        """One HTTP attempt, cut off after ``limit`` seconds however the bytes arrive."""
        url = self.config.base_url[index]
        redact = self.config.redact
        start = time.perf_counter()
        rejected: BackendError | None = None
        try:
            async with asyncio.timeout(limit):
                response = await state.clients[index].post("/chat/completions", body=kwargs, cast_to=dict)
        except TimeoutError as e:
            raise _Retryable(f"no complete answer within {limit:.3g}s") from e
        except openai.APIConnectionError as e:  # includes APITimeoutError
            raise _Retryable(connection_failure(e, redact), refused=connection_refused(e)) from e
        except openai.APIStatusError as e:
            message = redact(str(e))
            if e.status_code in _RETRY_STATUSES or e.status_code >= 500:
                retry_after = _retry_after(getattr(e.response, "headers", None))
                after = f", Retry-After {retry_after:g}s" if retry_after is not None else ""
                raise _Retryable(f"HTTP {e.status_code}{after}: {message}", retry_after) from e
            if message == str(e):
                raise self._rejected(e, url) from e
            # The body echoed a secret: raise outside this block, so no chained exception holds it.
            rejected = self._rejected(e, url)
        except ValueError as e:  # the body did not decode or parse (JSONDecodeError, UnicodeDecodeError)
            self.health.failed(index)
            raise InvalidResponseError(
                f"{url} answered with a body that is not a chat completion ({type(e).__name__}: {e}). "
                "Is base_url an OpenAI-compatible /v1 endpoint, and not a proxy's or web server's page?"
            ) from e
        if rejected is not None:
            raise rejected
        try:
            return _to_completion(response, time.perf_counter() - start, url, logprobs=self.config.logprobs)
        except InvalidResponseError:
            self.health.failed(index)
            raise

    def _rejected(self, e: openai.APIStatusError, url: str) -> BackendError:
        """The error for a status no other attempt would change (it is the request or the key)."""
        return api_error(
            e,
            name="The experience model endpoint",
            url=url,
            model=self.config.model,
            redact=self.config.redact,
            context_hint="Lower history_window or top_k, or serve the model with a larger --max-model-len.",
            key_hint="Pass api_key=... or set DREAMGYM_API_KEY to a key the server accepts.",
        )

    async def aclose(self) -> None:
        """Close the clients bound to the running loop."""
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None:
            for client in state.clients:
                await client.close()


def _close_clients(
    states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState], pid: int
) -> None:
    """Close a dropped backend's clients on their loops (in the process that made them)."""
    for loop, state in list(states.items()):
        states.pop(loop, None)
        if os.getpid() == pid:  # a forked child holds copies of the parent's loops, which run nowhere
            close_clients_on(loop, state.clients)


def _counted(failures: list[str]) -> str:
    """The failures joined, each different one once, with how many times it happened when more than once."""
    counts = Counter(failures)
    return "; ".join(f"{f} (x{n})" if n > 1 else f for f, n in counts.items())


def _snippet(value: Any) -> str:
    return repr(value)[:120]


def _to_completion(response: Any, latency: float, url: str, *, logprobs: bool = False) -> Completion:
    """The completion in ``response`` (the decoded JSON body), or :class:`InvalidResponseError` naming what is missing.

    A proxy's HTML page arrives here as a string, and JSON of another shape as a dict without
    ``choices``. With ``logprobs`` (:attr:`BackendConfig.logprobs`), the answer's mean token
    log-probability is read too; without, any the server sent unasked are left alone.
    """

    def invalid(what: str) -> InvalidResponseError:
        return InvalidResponseError(
            f"{url} answered, but not with a chat completion: {what}. Is base_url an OpenAI-compatible "
            "/v1 endpoint (not a proxy's or web server's page)?"
        )

    if not isinstance(response, dict):
        raise invalid(f"a {type(response).__name__} body {_snippet(response)}")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise invalid(f"no choices (got {_snippet(choices)})")
    message = choices[0].get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):  # null content (a refusal, a tool call) is no answer
        raise invalid(f"choice 0 has no message text (got {_snippet(message)})")
    usage = response.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    return Completion(
        text=text,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        cached_tokens=details.get("cached_tokens") if isinstance(details, dict) else None,
        latency_s=latency,
        endpoint=url,
        extra={"finish_reason": choices[0].get("finish_reason")},
        mean_logprob=_mean_logprob(choices[0].get("logprobs")) if logprobs else None,
    )


def _mean_logprob(logprobs: Any) -> float | None:
    """The mean of a choice's token log-probabilities (``logprobs.content[i].logprob``), or ``None``.

    ``None`` where the server sent none (not asked, or a server that ignores ``logprobs``) or sent them
    in another shape: a missing diagnostic does not fail the step.
    """
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    values: list[float] = []
    for token in content:
        value = token.get("logprob") if isinstance(token, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return None
        values.append(value)
    return min(0.0, math.fsum(values) / len(values))
