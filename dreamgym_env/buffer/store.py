"""The durable half of the replay buffer: what it needs from its store, and which store a location opens.

:func:`open_store` picks the store from the location: a file or ``":memory:"`` opens the SQLite
:class:`~dreamgym_env.storage.transitions_sqlite.TransitionStore`, the embedded default; a
``postgresql://`` URL opens :class:`~dreamgym_env.storage.transitions_postgres.PostgresTransitionStore`,
which every process of a cluster can share, with the same API and guarantees. Both run the same
statements, written once in :class:`~dreamgym_env.storage.transitions.SQLTransitionStore` (the
package's SQL lives in :mod:`dreamgym_env.storage`); :class:`Store` is what the buffer asks of either.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from dreamgym_env.records import Transition
from dreamgym_env.storage.transitions import StoredRow
from dreamgym_env.storage.transitions_sqlite import TransitionStore
from dreamgym_env.storage.urls import is_postgres_url


class Store(Protocol):
    """What the replay buffer needs from its store.

    :class:`TransitionStore` (SQLite) and
    :class:`~dreamgym_env.storage.transitions_postgres.PostgresTransitionStore` both provide it.
    """

    path: str
    """Where the store lives, safe to show (a URL's password is redacted)."""

    def get_meta(self, key: str) -> str | None: ...  # noqa: D102
    def set_meta(self, key: str, value: str) -> None: ...  # noqa: D102
    def transaction(self) -> AbstractContextManager[Any]: ...  # noqa: D102
    def insert(  # noqa: D102
        self,
        transitions: Sequence[Transition],
        keys: Sequence[bytes],
        embeddings: np.ndarray,
        max_synthetic: int | None = None,
    ) -> tuple[list[int | None], list[int]]: ...
    def count(self, *, domain: str | None = None, source: str | None = None) -> int: ...  # noqa: D102
    def episode_row_ids(self, episode_ids: Iterable[str]) -> dict[str, set[int]]: ...  # noqa: D102
    def stats(self) -> list[tuple[str, str, int]]: ...  # noqa: D102
    def max_id(self) -> int: ...  # noqa: D102
    def max_eviction_seq(self) -> int: ...  # noqa: D102
    def rows_after(self, watermark: int, batch_size: int = 50_000) -> Iterator[list[StoredRow]]: ...  # noqa: D102
    def evictions_after(self, seq: int) -> list[tuple[int, int, str]]: ...  # noqa: D102
    def get(self, ids: Sequence[int]) -> dict[int, Transition]: ...  # noqa: D102
    def data_version(self) -> int: ...  # noqa: D102
    def iter_transitions(  # noqa: D102
        self, *, domain: str | None = None, source: str | None = None, batch_size: int = 10_000
    ) -> Iterator[Transition]: ...
    def replace_embeddings(self, items: Iterable[tuple[int, np.ndarray]]) -> None: ...  # noqa: D102
    def set_reasoning(self, items: Iterable[tuple[str, int, str]]) -> int: ...  # noqa: D102
    def iter_pairs(self, batch_size: int = 10_000) -> Iterator[list[tuple[int, str, str]]]: ...  # noqa: D102
    def close(self) -> None: ...  # noqa: D102


def open_store(
    location: str,
    busy_timeout_s: float = 30.0,
    synchronous: str = "NORMAL",
    *,
    read_only: bool = False,
    create: bool = True,
) -> Store:
    """The store at ``location``: PostgreSQL for a ``postgresql://`` URL, else a SQLite file (or memory).

    Args:
        location: A SQLite file, ``":memory:"``, or ``postgresql://user:password@host:port/dbname``.
        busy_timeout_s: How long a writer waits for another writer's lock (and, for PostgreSQL, the
            connect timeout).
        synchronous: SQLite's ``synchronous`` pragma (PostgreSQL commits are durable by the server's
            own settings).
        read_only: Open an existing SQLite buffer for reading only (see :class:`TransitionStore`); a
            PostgreSQL store is opened as usual.
        create: ``False`` refuses a SQLite file without the buffer's tables instead of making them.
    """
    if is_postgres_url(location):
        from dreamgym_env.storage.transitions_postgres import PostgresTransitionStore

        return PostgresTransitionStore(location, busy_timeout_s)
    return TransitionStore(location, busy_timeout_s, synchronous, read_only=read_only, create=create)
