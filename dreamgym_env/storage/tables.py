"""A few tables in SQLite or PostgreSQL behind one small interface, for stores whose SQL is portable.

The task pool's statements run unchanged on both engines (``ON CONFLICT DO NOTHING``, ``RETURNING``,
window functions); only the schema differs. A store writes ``?`` placeholders; on PostgreSQL they
become ``%s``. Writes are one transaction each, with the writer lock taken up front on both engines
(SQLite's ``BEGIN IMMEDIATE``; on PostgreSQL an ``EXCLUSIVE`` lock on ``lock_table``, see
:mod:`dreamgym_env.storage.postgres`), so sequence numbers become visible in increasing order and a
reader may catch up with "everything after the last one I saw".
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from dreamgym_env.errors import StoreError
from dreamgym_env.storage.postgres import PostgresPool
from dreamgym_env.storage.sqlite import open_sqlite, table_names, write_transaction
from dreamgym_env.storage.urls import is_postgres_url

__all__ = ["Executor", "Tables", "open_tables"]


class Executor(Protocol):
    """Runs statements inside one transaction (or, for reads, on their own)."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` and return every row it produced (none for a statement without ``RETURNING``)."""
        ...

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run ``sql`` and return how many rows it changed."""
        ...

    def many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once per parameter tuple."""
        ...


class Tables(Executor, Protocol):
    """A store's tables: reads through the :class:`Executor` methods, writes through :meth:`write`."""

    location: str
    dialect: str

    def write(self) -> Any:
        """A context manager: one write transaction, yielding an :class:`Executor`."""
        ...

    def close(self) -> None:
        """Close the connection(s)."""
        ...


class _SQLiteExecutor:
    def __init__(self, conn: sqlite3.Connection, location: str, what: str) -> None:
        self._conn, self._location, self._what = conn, location, what

    def _run(self, action: str, fn: Any) -> Any:
        try:
            return fn()
        except sqlite3.Error as e:
            raise StoreError(f"cannot {action} the {self._what} at {self._location}: {e}") from e

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._run("use", lambda: self._conn.execute(sql, tuple(params)).fetchall())  # type: ignore[no-any-return]

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._run("write to", lambda: self._conn.execute(sql, tuple(params)).rowcount))

    def many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        self._run("write to", lambda: self._conn.executemany(sql, [tuple(p) for p in params]))


class SQLiteTables(_SQLiteExecutor):
    """Tables in one SQLite file (or memory), opened by :func:`~dreamgym_env.storage.sqlite.open_sqlite`."""

    dialect = "sqlite"

    def __init__(
        self, path: str, *, what: str, busy_timeout_s: float, synchronous: str, read_only: bool = False
    ) -> None:
        conn = open_sqlite(
            path, what=what, busy_timeout_s=busy_timeout_s, synchronous=synchronous, read_only=read_only
        )
        super().__init__(conn, path, what)
        self.location = path
        self._lock = threading.RLock()

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return super().rows(sql, params)

    @contextmanager
    def write(self) -> Iterator[Executor]:
        with self._lock:
            try:
                with write_transaction(self._conn):
                    yield self
            except sqlite3.Error as e:  # BEGIN or COMMIT failed (statements raise StoreError already)
                raise StoreError(f"cannot write to the {self._what} at {self.location}: {e}") from e

    def table_names(self) -> set[str]:
        """The tables of the file, for a store checking it was given the right one."""
        with self._lock:
            return self._run("read", lambda: table_names(self._conn))  # type: ignore[no-any-return]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


class _PostgresExecutor:
    def __init__(self, conn: Any, db: PostgresPool) -> None:
        self._conn, self._db = conn, db

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._conn.execute(_pg(sql), tuple(params))
        return list(cursor.fetchall()) if cursor.description is not None else []

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._conn.execute(_pg(sql), tuple(params)).rowcount)

    def many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        if params:
            self._conn.cursor().executemany(_pg(sql), [tuple(p) for p in params])


class PostgresTables:
    """Tables in a PostgreSQL database, through a :class:`~dreamgym_env.storage.postgres.PostgresPool`."""

    dialect = "postgresql"

    def __init__(self, url: str, *, what: str, lock_table: str, timeout_s: float) -> None:
        self._db = PostgresPool(url, what=what, lock_table=lock_table, timeout_s=timeout_s)
        self.location = self._db.location

    def _read(self, fn: Any) -> Any:
        try:
            with self._db.connection() as conn:
                return fn(_PostgresExecutor(conn, self._db))
        except StoreError:
            raise
        except Exception as e:
            raise self._db.error("cannot use", e) from e

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._read(lambda ex: ex.rows(sql, params))  # type: ignore[no-any-return]

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        return int(self._read(lambda ex: ex.count(sql, params)))

    def many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        self._read(lambda ex: ex.many(sql, params))

    @contextmanager
    def write(self) -> Iterator[Executor]:
        try:
            with self._db.write() as conn:
                yield _PostgresExecutor(conn, self._db)
        except StoreError:
            raise
        except Exception as e:
            import psycopg

            if isinstance(e, psycopg.Error):
                raise self._db.error("cannot write to", e) from e
            raise

    def setup(self, lock_key: int, statements: Sequence[str], *, meta_table: str) -> None:
        """Run the schema statements once, serialised across processes; skipped once ``meta_table`` has a version."""

        def create(conn: Any) -> None:
            for statement in statements:
                conn.execute(statement)

        try:
            self._db.run_setup(lock_key, create, meta_table=meta_table)
        except Exception as e:
            raise self._db.error("cannot create the tables of", e) from e

    def close(self) -> None:
        self._db.close()


def open_tables(
    location: str,
    *,
    what: str,
    lock_table: str,
    busy_timeout_s: float = 30.0,
    synchronous: str = "NORMAL",
    read_only: bool = False,
) -> SQLiteTables | PostgresTables:
    """SQLite tables for a file or ``":memory:"``, PostgreSQL tables for a ``postgresql://`` URL.

    ``read_only`` opens an existing SQLite file through ``mode=ro`` (see
    :func:`~dreamgym_env.storage.sqlite.open_sqlite`); a PostgreSQL database is opened as usual.
    """
    if is_postgres_url(location):
        return PostgresTables(location, what=what, lock_table=lock_table, timeout_s=busy_timeout_s)
    return SQLiteTables(
        location, what=what, busy_timeout_s=busy_timeout_s, synchronous=synchronous, read_only=read_only
    )
