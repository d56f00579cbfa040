"""Scripted backends that observe how requests arrive, for tests of concurrency."""

from __future__ import annotations

import asyncio

from dreamgym_env import ScriptedBackend
from dreamgym_env.experience.backends.base import Completion, CompletionRequest


class PeakBackend(ScriptedBackend):
    """The scripted model, counting the most requests it had in flight at once.

    Each request waits (up to ``gather_s``) for ``expected`` requests to be in flight, so requests sent
    together are seen together however slowly the machine builds them, while requests sent one after
    another never overlap (serial sending would take ``expected`` x ``gather_s`` and peak at 1).
    """

    def __init__(self, expected: int = 4, gather_s: float = 5.0) -> None:
        super().__init__()
        self.expected, self.gather_s = expected, gather_s
        self.in_flight = self.peak = 0

    async def acomplete(self, request: CompletionRequest) -> Completion:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.gather_s
            while self.in_flight < self.expected and loop.time() < deadline:
                await asyncio.sleep(0.001)
            return await super().acomplete(request)
        finally:
            self.in_flight -= 1
