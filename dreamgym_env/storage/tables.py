"""Portable SQL on SQLite or PostgreSQL: the one layer under the replay buffer's store and the task pool.

A store writes each statement once, with ``?`` placeholders and the column types of its schema as
``{serial}``, ``{blob}``, ``{boolean}``, ``{double}`` and ``{bigint}``; the engine's :class:`Dialect`
spells them (``%s`` for psycopg, ``BIGSERIAL PRIMARY KEY`` for SQLite's ``AUTOINCREMENT`` key, ...)
and matches a list parameter (SQLite: ``IN (?, ?, ...)`` in chunks under its bound-parameter limit;
PostgreSQL: ``= ANY(%s)`` with the whole list bound as one array).

:func:`open_tables` opens a location's :class:`SQLiteTables` or :class:`PostgresTables`: reads on
their own (:meth:`~Tables.rows`), and writes as one transaction each (:meth:`~Tables.write`) with
the writer lock taken up front on both engines (SQLite's ``BEGIN IMMEDIATE``; on PostgreSQL an
``EXCLUSIVE`` lock on ``lock_table``, see :mod:`dreamgym_env.storage.postgres`), so sequence numbers
become visible in increasing order and a reader may catch up with "everything after the last one I
saw". The engine's errors become a :class:`StoreError` naming the action and the store.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from dreamgym_env.errors import StoreError
from dreamgym_env.storage.postgres import PostgresPool
from dreamgym_env.storage.sqlite import database_kind, open_sqlite, table_names, write_transaction
from dreamgym_env.storage.urls import is_postgres_url

_MAX_BOUND_VALUES = 30_000
"""Values per ``IN (?, ...)`` list: under SQLite's default limit of 32,766 bound parameters."""


@dataclass(frozen=True)
class Dialect:
    """How one engine spells a portable statement and schema.

    Attributes:
        placeholder: ``"?"`` (SQLite) or ``"%s"`` (psycopg); statements are written with ``?`` and
            contain no other ``?`` or ``%``.
        array_params: Whether a list is bound as one array parameter (``= ANY(%s)``) instead of one
            placeholder per element (``IN (?, ?, ...)``).
        serial: A primary key whose values are handed out in increasing order and never reused
            (SQLite's ``AUTOINCREMENT``, a PostgreSQL sequence).
        blob: Bytes.
        boolean: A flag.
        double: 8-byte floats (SQLite's ``REAL`` is one).
        bigint: A reference to a ``serial`` key.
    """

    placeholder: str
    array_params: bool
    serial: str
    blob: str
    boolean: str
    double: str
    bigint: str

    def schema(self, statements: Iterable[str], **names: str) -> list[str]:
        """``statements`` with the column types (``{serial}``, ...) and the other ``names`` filled in."""
        types = {k: v for k, v in asdict(self).items() if k not in ("placeholder", "array_params")}
        return [statement.format(**types, **names) for statement in statements]

    def sql(self, statement: str) -> str:
        """``statement`` (written with ``?``) in this engine's placeholder style."""
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    def member(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """A condition "``column`` is one of ``values``" and its parameters (``values`` must be non-empty)."""
        if self.array_params:
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def chunks(self, values: Sequence[Any]) -> Iterator[Sequence[Any]]:
        """``values`` in pieces small enough for one :meth:`member` condition each.

        SQLite binds at most ``SQLITE_MAX_VARIABLE_NUMBER`` parameters per statement (32,766 by
        default since SQLite 3.32); an array parameter has no such limit, so it takes them all.
        """
        size = len(values) if self.array_params else _MAX_BOUND_VALUES
        for start in range(0, len(values), max(size, 1)):
            yield values[start : start + size]


SQLITE = Dialect("?", False, "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB", "INTEGER", "REAL", "INTEGER")
POSTGRESQL = Dialect("%s", True, "BIGSERIAL PRIMARY KEY", "BYTEA", "BOOLEAN", "DOUBLE PRECISION", "BIGINT")


def where(*clauses: str, **equal: object) -> tuple[str, list[Any]]:
    """`` WHERE`` and ``clauses`` followed by ``column = ?`` for each set (not ``None``) condition of ``equal``.

    Returns the text (``""`` when there is no condition) and the parameters of ``equal``'s conditions;
    those of ``clauses`` the caller binds before them.
    """
    used = {k: v for k, v in equal.items() if v is not None}
    conditions = [*clauses, *(f"{k} = ?" for k in used)]
    return (f" WHERE {' AND '.join(conditions)}" if conditions else ""), list(used.values())


class Executor:
    """Statements (written with ``?``) run on one connection inside a write transaction.

    ``execute`` and ``cursor().executemany`` behave the same on ``sqlite3`` and psycopg; :attr:`conn`
    is there for what only one engine does (``lastrowid``, a binary cursor).
    """

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self.conn, self.dialect = conn, dialect

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` and return every row it produced (none for a statement without ``RETURNING``)."""
        cursor = self.conn.execute(self.dialect.sql(sql), params)
        return list(cursor.fetchall()) if cursor.description is not None else []

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run ``sql`` and return how many rows it changed."""
        return int(self.conn.execute(self.dialect.sql(sql), params).rowcount)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run ``sql`` once per parameter tuple; return how many rows they changed."""
        if not rows:
            return 0
        cursor = self.conn.cursor()
        cursor.executemany(self.dialect.sql(sql), rows)
        return max(int(cursor.rowcount), 0)


class Tables(ABC):
    """One store's tables in one database: reads, write transactions, schema setup, errors.

    Attributes:
        location: Where the tables live, safe to show (a URL's password is redacted).
        what: What is stored ("replay buffer", "task pool"), for error messages.
    """

    dialect: ClassVar[Dialect]
    location: str
    what: str
    _errors: tuple[type[Exception], ...]
    """The engine's errors, which :meth:`write` and :meth:`rows` turn into a :class:`StoreError`."""

    @abstractmethod
    def rows(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        """Every row of a read (``sql`` written with ``?``); ``binary`` asks for a fast blob transfer."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Executor]:
        """One write transaction holding the writer lock, committed whole or rolled back whole.

        Inside another one (of this thread), a savepoint of it instead. The engine's errors pass
        through as they are.
        """

    @abstractmethod
    def error(self, action: str, e: BaseException) -> StoreError:
        """A :class:`StoreError` saying that ``action`` ("could not write to") failed on these tables."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection(s) (idempotent)."""

    @contextmanager
    def write(self, action: str = "could not write to") -> Iterator[Executor]:
        """:meth:`transaction`, with the engine's errors raised as a :class:`StoreError` saying ``action``."""
        try:
            with self.transaction() as tx:
                yield tx
        except self._errors as e:
            raise self.error(action, e) from e

    def setup(self, statements: Sequence[str], *, lock_key: int, meta_table: str) -> None:
        """Run the schema statements (``IF NOT EXISTS``) in one transaction; closes the tables if that fails.

        ``lock_key`` and ``meta_table`` serve PostgreSQL (see :meth:`PostgresTables.setup`).
        """
        try:
            with self.write("cannot create the tables of") as tx:
                for statement in statements:
                    tx.count(statement)
        except BaseException:
            self.close()
            raise


class SQLiteTables(Tables):
    """Tables in one SQLite file (or memory), opened by :func:`~dreamgym_env.storage.sqlite.open_sqlite`.

    One connection, usable from several threads of one process (calls are serialised by a lock).
    """

    dialect = SQLITE
    _errors = (sqlite3.Error,)

    def __init__(
        self,
        path: str,
        *,
        what: str,
        busy_timeout_s: float = 30.0,
        synchronous: str = "NORMAL",
        read_only: bool = False,
    ) -> None:
        self._conn = open_sqlite(
            path, what=what, busy_timeout_s=busy_timeout_s, synchronous=synchronous, read_only=read_only
        )
        self.location, self.what = path, what
        self._lock = threading.RLock()
        self._depth = 0

    def rows(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        """Every row of a read on the store's connection (``binary`` changes nothing on SQLite)."""
        try:
            with self._lock:
                return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise self.error("could not read", e) from e

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (no lock-upgrade deadlocks); nested, a savepoint."""
        with self._lock:
            depth = self._depth
            with write_transaction(self._conn) if depth == 0 else _savepoint(self._conn, f"tx{depth}"):
                self._depth += 1
                try:
                    yield Executor(self._conn, SQLITE)
                finally:
                    self._depth = depth

    def error(self, action: str, e: BaseException) -> StoreError:
        """A :class:`StoreError` naming ``action`` and the file."""
        return StoreError(f"{action} the {self.what} at {self.location}: {e}")

    def require(self, tables: set[str], hint: str) -> None:
        """Refuse (and close) a file without ``tables``, naming what it holds and then ``hint``.

        For a reader, or a writer that must not add its tables to a file that names something else.
        """
        try:
            with self._lock:
                found = table_names(self._conn)
        except sqlite3.Error as e:
            self.close()
            raise self.error("could not read", e) from e
        if tables <= found:
            return
        self.close()
        raise StoreError(f"{self.location} is not a {self.what}: it is {database_kind(found)}; {hint}")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()


@contextmanager
def _savepoint(conn: sqlite3.Connection, name: str) -> Iterator[None]:
    """A savepoint of the open transaction, rolled back to on an error."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # else SQLite rolled back the whole transaction itself
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
        raise
    if conn.in_transaction:
        conn.execute(f"RELEASE {name}")


class PostgresTables(Tables):
    """Tables in a PostgreSQL database, through a :class:`~dreamgym_env.storage.postgres.PostgresPool`.

    Reads run on any pooled connection; a write transaction holds one, and a thread's writes inside
    an open :meth:`transaction` join it.
    """

    dialect = POSTGRESQL

    def __init__(
        self, url: str, *, what: str, lock_table: str, timeout_s: float = 30.0, max_connections: int = 4
    ) -> None:
        self._db = PostgresPool(
            url, what=what, lock_table=lock_table, timeout_s=timeout_s, max_connections=max_connections
        )
        import psycopg  # present: the pool needs it

        self.location, self.what = self._db.location, what
        self._errors = (psycopg.Error,)

    def rows(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        """Every row of a read on a pooled connection; ``binary`` transfers blobs as they are."""
        try:
            with self._db.connection() as conn:
                return conn.cursor(binary=binary).execute(self.dialect.sql(sql), params).fetchall()
        except self._errors as e:
            raise self.error("could not read", e) from e

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        """A write transaction with the writer lock; nested in this thread's open one, a savepoint."""
        with self._db.transaction() as conn:
            yield Executor(conn, POSTGRESQL)

    def error(self, action: str, e: BaseException) -> StoreError:
        """A :class:`StoreError` naming ``action`` and the database, with no password in it."""
        return self._db.error(action, e)

    def setup(self, statements: Sequence[str], *, lock_key: int, meta_table: str) -> None:
        """Run the schema statements once, serialised across processes by the advisory lock ``lock_key``.

        Skipped when ``meta_table`` already records a schema version (see
        :meth:`~dreamgym_env.storage.postgres.PostgresPool.run_setup`).
        """

        def create(conn: Any) -> None:
            for statement in statements:
                conn.execute(statement)

        try:
            self._db.run_setup(lock_key, create, meta_table=meta_table)
        except BaseException as e:
            self.close()
            if isinstance(e, self._errors):
                raise self.error("cannot create the tables of", e) from e
            raise

    def close(self) -> None:
        """Close the connection pool (idempotent)."""
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
