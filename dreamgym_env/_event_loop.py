"""Run coroutines from synchronous code (``env.step``) on one shared background event loop.

A private loop thread, rather than ``asyncio.run`` per call, because (a) HTTP clients and semaphores
are bound to a loop and reusing them keeps connections alive across steps, and (b) it works when the
caller already runs an event loop (Jupyter, async trainers), where ``run_until_complete`` would fail.
The loop is recreated after ``fork`` (AsyncVectorEnv workers), since threads do not survive it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_owner_pid: int | None = None


def shared_loop() -> asyncio.AbstractEventLoop:
    """The process-wide background loop, started on first use."""
    global _loop, _owner_pid
    with _lock:
        if _loop is None or _owner_pid != os.getpid() or not _loop.is_running():
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def _serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            threading.Thread(target=_serve, name="dreamgym-io", daemon=True).start()
            started.wait()
            _loop, _owner_pid = loop, os.getpid()
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the shared loop and wait for its result (exceptions propagate).

    Waiting is bounded by the coroutine itself (the HTTP backend enforces its deadline where each
    request is made) and, if given, by ``timeout`` seconds. When the wait ends early (the timeout,
    or Ctrl-C in the calling thread) the coroutine is cancelled on the loop rather than left running.

    Raises:
        TimeoutError: ``timeout`` passed first.
    """
    loop = shared_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError(
            "run_sync() called from the dreamgym event loop itself; await the coroutine instead."
        )
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    except TimeoutError as e:
        if future.done():  # the coroutine's own TimeoutError
            raise
        future.cancel()
        raise TimeoutError(f"the call did not finish within {timeout:g}s and was cancelled") from e
    except BaseException:
        future.cancel()  # KeyboardInterrupt: stop the work instead of leaving it on the loop
        raise


async def gather_all_or_none(
    aws: Sequence[Awaitable[T]], abandon: Callable[[int, T], None] | None = None
) -> list[T]:
    """Every result, in order, or none of them.

    On the first failure, or when the caller is cancelled (``asyncio.wait_for``, a cancelled
    rollout), the others are cancelled and awaited, ``abandon(i, result)`` is called for each one
    that had finished, and the failure (or the cancellation) is raised. ``asyncio.gather`` would
    leave the others running on the shared loop, their answers arriving after the caller gave up.
    """
    tasks = [asyncio.ensure_future(a) for a in aws]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        await _give_up(tasks, abandon)
        raise
    failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None), None)
    if failed is None:
        return [t.result() for t in tasks]
    await _give_up(tasks, abandon)
    error = failed.exception()
    assert error is not None
    raise error


async def _give_up(tasks: Sequence[asyncio.Future[T]], abandon: Callable[[int, T], None] | None) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if abandon is not None:
        for i, t in enumerate(tasks):
            if not t.cancelled() and t.exception() is None:
                abandon(i, t.result())
