"""A spec domain's offline trajectories: read with the replay buffer's loaders, served as retrieval context."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamgym_env.errors import DataFormatError, DomainError
from dreamgym_env.records import Transition
from dreamgym_env.retrieval import QueryRetriever, RetrievalQuery, retrieve_query

if TYPE_CHECKING:
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.domains.spec import DomainSpec


def existing_trajectories(spec: DomainSpec) -> Path | None:
    """The spec's trajectories path (``None`` when it names none), checked to exist."""
    path = spec.trajectories_path()
    if path is not None and not path.exists():
        raise DomainError(
            f"trajectories: {str(path)!r} does not exist -> a file or folder of trajectories "
            "(a relative path is read from the spec file's folder)"
        )
    return path


def load_trajectories(spec: DomainSpec) -> list[Transition]:
    """Read the spec's offline trajectories with the replay buffer's loaders.

    Every transition is given the spec's domain name, so retrieval finds it.

    Raises:
        DomainError: the path does not exist.
        DataFormatError: a malformed record (names the file and line).
    """
    path = existing_trajectories(spec)
    if path is None:
        return []
    from dreamgym_env.buffer.loaders import LoadIssue, iter_records

    transitions: list[Transition] = []
    for item in iter_records([path], spec.trajectory_format, domain=spec.name):
        if isinstance(item, LoadIssue):
            raise DataFormatError(item.message, path=item.path, line=item.line)
        transitions.extend(item.transitions)
    return transitions


def build_retriever(spec: DomainSpec) -> ReplayBuffer | None:
    """An in-memory replay buffer seeded with the spec's trajectories (``None`` when it has none).

    This is the default retriever of envs made from a spec; pass ``retriever=`` to ``gymnasium.make``
    to use a durable or shared buffer instead.
    """
    if spec.trajectories_path() is None:
        return None
    from dreamgym_env.buffer import ReplayBuffer

    buffer = ReplayBuffer.open(":memory:")
    buffer.add_many(load_trajectories(spec))
    return buffer


class SpecTrajectoryRetriever(QueryRetriever):
    """A :class:`Retriever` that builds the spec's buffer on first use.

    Registered as the env's default ``retriever`` so that ``gymnasium.make`` (which deep-copies its
    registered keyword arguments on every call) stays cheap, and each env gets its own buffer the first
    time it retrieves. A ``retriever=`` given to ``make`` replaces it.
    """

    def __init__(self, spec: DomainSpec) -> None:
        self.spec = spec
        self._inner: ReplayBuffer | None = None
        self._lock = threading.Lock()

    def _get(self) -> ReplayBuffer:
        with self._lock:
            if self._inner is None:
                built = build_retriever(self.spec)
                if built is None:
                    raise DomainError(f"domain {self.spec.name!r} has no trajectories to retrieve from")
                self._inner = built
            return self._inner

    def retrieve_query(self, query: RetrievalQuery) -> list[Transition]:
        """Top-k most similar transitions of the spec's buffer."""
        return retrieve_query(self._get(), query)

    def add(self, transition: Transition) -> None:
        """Offer a new transition to the spec's buffer."""
        self._get().add(transition)

    def retrieve_many(self, queries: Sequence[RetrievalQuery]) -> list[list[Transition]]:
        """Many queries in one search of the spec's buffer (a vector env serves its sub-envs so)."""
        return self._get().retrieve_many(queries)

    def add_many(self, transitions: Iterable[Transition], *, apply_policy: bool = False) -> Any:
        """Many transitions in one transaction: a vector env stores its steps all or nothing through this."""
        return self._get().add_many(transitions, apply_policy=apply_policy)

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"])  # type: ignore[misc]

    def __deepcopy__(self, memo: dict[int, Any]) -> SpecTrajectoryRetriever:
        return SpecTrajectoryRetriever(self.spec)

    def __repr__(self) -> str:
        return f"SpecTrajectoryRetriever({self.spec.name!r}, {self.spec.trajectories_path()})"
