"""Clients of OpenAI-compatible endpoints: how the package builds them, and what their failures become.

The experience model's backend, the embedding client and the policy clients of training all talk to an
OpenAI-compatible server (vLLM's, mostly) through the ``openai`` package. They build their clients
here, so each relies on openai's own timeouts and retries rather than a loop of its own, and their
failures become this package's errors here, each blamed on one boundary:

- no connection, or no answer in time: :class:`~dreamgym_env.errors.ServerUnreachableError` (a
  refused connection says so, and asks whether the server is running);
- the prompt is past the model's context (HTTP 400 saying so):
  :class:`~dreamgym_env.errors.PromptTooLongError`;
- any other failure (a bad request, a model the server does not serve, a refused key, another HTTP
  error): :class:`~dreamgym_env.errors.BackendError`.

Each message names the endpoint and what to do, and goes through the caller's redaction, so neither a
key nor a password written in the URL shows. ``openai`` is imported when a client is built or an error
translated, not with this module, so a caller may create its client lazily and stay picklable.
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from dreamgym_env._secrets import redact_endpoint_text
from dreamgym_env.errors import BackendError, PromptTooLongError, ServerUnreachableError

if TYPE_CHECKING:
    import openai

_CONTEXT_MARKERS = ("maximum context length", "context length", "too long", "max_model_len")
"""What servers write in a 400 whose prompt did not fit (vLLM, OpenAI, SGLang, llama.cpp)."""

_CONNECTION_ERRNOS = {
    errno.ECONNRESET: "the connection was reset",
    errno.ECONNREFUSED: "the connection was refused",
    errno.EPIPE: "the connection was closed while the request was sent",
    errno.ECONNABORTED: "the connection was aborted",
}
"""What a socket error on a request means, in words; openai may name it otherwise."""


def sync_client(
    base_url: str, *, api_key: str = "EMPTY", timeout_s: float, max_retries: int = 2
) -> openai.OpenAI:
    """A blocking client of ``base_url``; openai retries a failed attempt ``max_retries`` times itself."""
    import openai

    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=max_retries)


def async_client(
    base_url: str,
    *,
    api_key: str = "EMPTY",
    timeout_s: float,
    max_retries: int = 2,
    connect_timeout_s: float | None = None,
    headers: Mapping[str, str] | None = None,
    max_connections: int | None = None,
) -> openai.AsyncOpenAI:
    """An asyncio client of ``base_url``, usable only on the event loop it is first used in.

    Args:
        base_url: The endpoint (``http://HOST:PORT/v1``).
        api_key: The key sent as a bearer token (``"EMPTY"`` for a server that needs none).
        timeout_s: Seconds a read may wait (openai's timeout, not a bound on the whole request).
        max_retries: Attempts openai makes again after a failed one (0: the caller retries).
        connect_timeout_s: Seconds a connection may take, when not ``timeout_s``.
        headers: Headers sent with every request (an endpoint's own authorization).
        max_connections: Keep this many connections alive, over openai's aiohttp transport (about a
            third less CPU per request than the default httpx one); ``None`` keeps openai's defaults.
    """
    import openai
    from openai._constants import DEFAULT_TIMEOUT

    # openai's own HTTP types (httpx or its successor, whichever this openai version uses).
    timeout: Any = (
        timeout_s
        if connect_timeout_s is None
        else type(DEFAULT_TIMEOUT)(timeout_s, connect=connect_timeout_s)
    )
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=max_retries,
        default_headers=dict(headers) if headers else None,
        http_client=None if max_connections is None else _aiohttp_client(max_connections, timeout),
    )


_closing: set[asyncio.Task[None]] = set()
"""Closes scheduled by :func:`close_clients_on` on the running loop, kept until done."""


def close_clients_on(loop: asyncio.AbstractEventLoop, clients: Sequence[Any], wait_s: float = 2.0) -> None:
    """Close async ``clients`` bound to ``loop`` from synchronous code, quietly: for finalizers.

    aiohttp reports a session still open when it is garbage-collected (``Unclosed client session``,
    ``Unclosed connector`` on stderr at exit), so an owner dropped without ``aclose`` closes its clients
    here. On a loop running in another thread (the package's shared loop) the close is waited for up to
    ``wait_s`` seconds; on the calling thread's own running loop it is scheduled; a loop that is
    neither running nor closed runs it. A closed loop's clients cannot be closed any more. Errors are
    swallowed: there is nobody left to tell.
    """

    async def close_all() -> None:
        for client in clients:
            with suppress(Exception):
                await client.close()

    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop.is_closed():
        return
    if running is loop:
        task = loop.create_task(close_all())
        _closing.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(_closing.discard)
    elif loop.is_running():
        future = asyncio.run_coroutine_threadsafe(close_all(), loop)
        with suppress(Exception):
            future.result(wait_s)
    elif running is None:
        with suppress(Exception):
            loop.run_until_complete(close_all())


def _aiohttp_client(max_connections: int, timeout: Any) -> Any:
    """The aiohttp-based HTTP client of ``openai``, keeping a connection alive for every request in flight.

    The default limit keeps 100: a vector env of more sub-envs closes the surplus after every step and
    opens it again on the next, and against vLLM's server some requests on such fresh connections got
    no answer until the read timeout (a 60 s stall of the whole lock-step step).
    """
    import openai
    from openai._constants import DEFAULT_CONNECTION_LIMITS

    limits = type(DEFAULT_CONNECTION_LIMITS)(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    return openai.DefaultAioHttpClient(limits=limits, timeout=timeout)


def _socket_error(e: BaseException) -> OSError | None:
    """The socket error (a reset, a refusal...) anywhere in ``e``'s chain of causes, if there is one."""
    seen: set[int] = set()
    link: BaseException | None = e
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, OSError) and link.errno in _CONNECTION_ERRNOS:
            return link
        link = link.__cause__ or link.__context__
    return None


def connection_failure(e: BaseException, redact: Callable[[str], str] = str) -> str:
    """What went wrong with a request that got no answer, read from ``e`` and the errors behind it.

    openai names a failure after its transport's exception class, not after what happened: through
    aiohttp a connection reset arrives as ``APITimeoutError: Request timed out.``. A socket error
    anywhere in the chain (a reset, a refusal) is named for what it is; otherwise ``e`` and its cause.
    """
    socket_error = _socket_error(e)
    if socket_error is not None:
        what = _CONNECTION_ERRNOS.get(socket_error.errno or 0, "a socket error")
        return f"{what} ({redact(str(socket_error))})"
    cause = f" ({redact(str(e.__cause__))})" if e.__cause__ is not None else ""
    return f"{type(e).__name__}: {redact(str(e))}{cause}"


def connection_refused(e: BaseException) -> bool:
    """Whether ``e`` (or an error behind it) is a refused connection: nothing listens at the address."""
    socket_error = _socket_error(e)
    return socket_error is not None and socket_error.errno == errno.ECONNREFUSED


REFUSED_HINT = "nothing is listening there. Is the server running?"
"""What a refused connection means, for the messages that report one."""


def api_error(
    e: openai.APIError,
    *,
    name: str,
    url: str,
    model: str,
    redact: Callable[[str], str],
    context_hint: str = "Shorten the prompt, or serve the model with a larger --max-model-len.",
    key_hint: str = "Pass a key the server accepts.",
) -> BackendError:
    """This package's error for ``e``, an openai failure of a request to ``model`` at ``url``.

    Args:
        e: What openai raised.
        name: What the endpoint is, to start a message ("The policy endpoint").
        url: The endpoint.
        model: The model the request named.
        redact: Masks the secrets of the endpoint (its key, a password in the URL) in a message.
        context_hint: What to do when the prompt does not fit the model's context.
        key_hint: What to do when the server refuses the key.
    """
    import openai

    message = str(e)
    if isinstance(e, openai.APIConnectionError):  # includes APITimeoutError
        if connection_refused(e):
            return ServerUnreachableError(
                redact(f"{name} {url} refused the connection: {REFUSED_HINT} ({connection_failure(e)})")
            )
        return ServerUnreachableError(redact(f"{name} {url} did not answer: {connection_failure(e)}"))
    if isinstance(e, openai.BadRequestError):
        if any(marker in message.lower() for marker in _CONTEXT_MARKERS):
            return PromptTooLongError(
                redact(f"The prompt does not fit the context of {model} at {url}: {message}. {context_hint}")
            )
        return BackendError(redact(f"{name} {url} rejected the request: {message}"))
    if isinstance(e, openai.NotFoundError):
        return BackendError(
            redact(
                f"{name} {url} does not serve model {model!r} ({message}). GET {url}/models lists the served names."
            )
        )
    if isinstance(e, openai.APIStatusError):
        if e.status_code in (401, 403):
            return BackendError(
                redact(f"{name} {url} refused the API key (HTTP {e.status_code}): {message}. {key_hint}")
            )
        return BackendError(redact(f"{name} {url} answered HTTP {e.status_code}: {message}"))
    return BackendError(redact(f"{name} {url} failed for model {model!r}: {message}"))


@contextmanager
def endpoint_errors(name: str, url: str, *, model: str, api_key: str | None = None) -> Iterator[None]:
    """Raise openai's failures in the block as :func:`api_error` translates them, blamed on ``url``.

    Raised ``from None``: openai's own error, whose text may hold the key, stays out of the chain.

    Example:
        >>> with endpoint_errors("The embedding endpoint", url, model=model, api_key=key):
        ...     response = client.embeddings.create(model=model, input=texts)
    """
    import openai

    try:
        yield
    except openai.APIError as e:
        raise api_error(
            e, name=name, url=url, model=model, redact=lambda text: redact_endpoint_text(text, url, api_key)
        ) from None
