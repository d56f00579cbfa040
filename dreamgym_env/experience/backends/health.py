"""Which of several endpoints failed lately, so requests stop paying for a dead one.

An endpoint that fails (no connection, no complete answer in time, HTTP 408/409/429/5xx) is *down*
for a cool-down (or the server's ``Retry-After``, if longer): requests try it only after every
healthy endpoint. When the cool-down has passed, one request at a time *probes* it (the others keep
treating it as down); an answer makes it healthy again, another failure starts a new cool-down. A
single dead endpoint thus costs one failed attempt per cool-down, not one per request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable


class EndpointHealth:
    """Health of endpoints ``0..n-1``; thread-safe (a backend may serve several event loops).

    Args:
        cooldown: Seconds a failed endpoint is tried last.
        clock: Monotonic seconds (tests pass a fake one).
    """

    def __init__(self, cooldown: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.cooldown = cooldown
        self._clock = clock
        self._lock = threading.Lock()
        self._down_until: dict[int, float] = {}  # endpoints not known healthy -> end of cool-down
        self._probing: set[int] = set()  # endpoints with a probe in flight

    def _is_down(self, index: int, now: float) -> bool:
        until = self._down_until.get(index)
        return until is not None and (now < until or index in self._probing)

    def pick(self, order: Iterable[int], exclude: set[int]) -> int | None:
        """The first endpoint of ``order`` not in ``exclude``, healthy ones before down ones.

        A down endpoint is still returned when nothing healthy is left: the last resort is better
        than no attempt. Picking an endpoint whose cool-down has passed makes this request its probe.
        """
        with self._lock:
            now = self._clock()
            candidates = [i for i in order if i not in exclude]
            if not candidates:
                return None
            healthy = [i for i in candidates if not self._is_down(i, now)]
            # With every candidate down, the one that recovers first.
            index = healthy[0] if healthy else min(candidates, key=lambda i: self._down_until.get(i, now))
            if index in self._down_until and self._down_until[index] <= now:
                self._probing.add(index)
            return index

    def is_down(self, index: int) -> bool:
        """Whether ``index`` is in its cool-down or being probed by another request."""
        with self._lock:
            return self._is_down(index, self._clock())

    def succeeded(self, index: int) -> None:
        """``index`` answered: healthy again."""
        with self._lock:
            self._down_until.pop(index, None)
            self._probing.discard(index)

    def failed(self, index: int, retry_after: float | None = None) -> None:
        """``index`` failed: down for the cool-down, or for ``retry_after`` seconds if longer."""
        with self._lock:
            self._down_until[index] = self._clock() + max(self.cooldown, retry_after or 0.0)
            self._probing.discard(index)

    def released(self, index: int) -> None:
        """An attempt on ``index`` ended without a verdict on its health (cancelled, bad request)."""
        with self._lock:
            self._probing.discard(index)

    def down(self) -> list[int]:
        """Endpoints in their cool-down now (for messages and tests)."""
        with self._lock:
            now = self._clock()
            return sorted(i for i in self._down_until if self._is_down(i, now))
