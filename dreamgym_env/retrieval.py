"""The small interface between the env and whatever supplies demonstrations.

The env only needs two operations: fetch the top-k stored transitions most similar to the current
(state, action), and offer each new transition for storage. :class:`dreamgym_env.buffer.ReplayBuffer`
implements it; so can any user object with the same two methods. A retriever that can also answer many
queries and store many transitions at once (:class:`BatchRetriever`) lets the vector env serve all its
sub-envs with one search and one write per step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from dreamgym_env.records import Transition


class RetrievalQuery(NamedTuple):
    """One env step's request for demonstrations, as :meth:`Retriever.retrieve` takes it."""

    state: str
    action: str
    k: int
    domain: str | None = None
    exclude_episode: str | None = None


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


@runtime_checkable
class BatchRetriever(Retriever, Protocol):
    """A :class:`Retriever` that also answers several queries and stores several transitions per call."""

    def retrieve_many(self, queries: Sequence[RetrievalQuery]) -> list[list[Transition]]:
        """The answer to each query, in order, as ``retrieve`` would give it."""
        ...

    def add_many(self, transitions: Iterable[Transition], *, apply_policy: bool = False) -> Any:
        """Offer many transitions; ``apply_policy=True`` filters them as ``add`` would."""
        ...


def retrieve_query(retriever: Retriever, query: RetrievalQuery) -> list[Transition]:
    """``retriever``'s answer to ``query``, through the :class:`Retriever` protocol's ``retrieve``."""
    return retriever.retrieve(
        query.state, query.action, query.k, domain=query.domain, exclude_episode=query.exclude_episode
    )


class QueryRetriever:
    """Base of a retriever that answers whole :class:`RetrievalQuery` objects.

    A wrapper around another retriever (one that builds it lazily, or answers a vector step from a
    batch) keys and forwards queries as they are; it implements :meth:`retrieve_query`, and the
    protocol's keyword form of ``retrieve`` comes from here.
    """

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
        return self.retrieve_query(RetrievalQuery(state, action, k, domain, exclude_episode))

    def retrieve_query(self, query: RetrievalQuery) -> list[Transition]:
        """The answer to ``query``."""
        raise NotImplementedError
