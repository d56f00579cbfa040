"""The small interface between the env and whatever supplies demonstrations.

The env only needs two operations: fetch the top-k stored transitions most similar to the current
(state, action), and offer each new transition for storage. :class:`dreamgym_env.buffer.ReplayBuffer`
implements it; so can any user object with the same two methods.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from dreamgym_env.types import Transition

__all__ = ["Retriever"]


@runtime_checkable
class Retriever(Protocol):
    """Supplies demonstrations to the experience model and receives new transitions."""

    def retrieve(
        self,
        state: str,
        action: str,
        k: int,
        *,
        domain: str | None = None,
        exclude_episode: str | None = None,
    ) -> list[Transition]:
        """Return up to ``k`` transitions most similar to (state, action), best first."""
        ...

    def add(self, transition: Transition) -> None:
        """Offer a transition for storage (the implementation may filter or deduplicate)."""
        ...
