"""PostgreSQL access shared by the server-backed stores: a connection pool and serialised writes.

The stores keep SQLite's guarantees on PostgreSQL with two rules:

- **Every write is one transaction** (``with conn.transaction()``): a writer killed mid-batch loses
  its connection and the server rolls the whole batch back.
- **Writers of one store are serialised** by an ``EXCLUSIVE`` lock on the store's main table, taken
  first in each write transaction (readers are never blocked). Row ids come from a sequence, so
  without the lock a transaction holding id 10 could commit after one holding id 11, and a reader
  that had already caught up to 11 would miss 10 forever. Under the lock ids become visible in
  increasing order, exactly as with SQLite's single writer, so "every row with ``id > watermark``"
  is a complete catch-up. ``lock_timeout`` bounds the wait, like SQLite's busy timeout.

psycopg (3) and psycopg_pool are imported only when a PostgreSQL URL is opened; a missing one names
the extra to install (``pip install "dreamgym-env[postgres]"``). Error messages show the URL through
:func:`~dreamgym_env.storage.urls.redact` and have the password scrubbed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from dreamgym_env._secrets import MASK
from dreamgym_env.errors import DependencyNotInstalled, StoreError
from dreamgym_env.storage.urls import redact

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

logger = logging.getLogger(__name__)


def _password(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return unquote(parts.password)
    for key, value in parse_qsl(parts.query):
        if key.lower() == "password":
            return value
    return None


def scrub(message: str, url: str) -> str:
    """``message`` with the URL's password (if any) and the URL itself replaced by safe forms."""
    message = message.replace(url, redact(url))
    secret = _password(url)
    if secret:
        message = message.replace(secret, MASK)
    return message


class PostgresPool:
    """A psycopg connection pool for one store, opened and checked up front.

    Connections are in autocommit mode; writes go through :meth:`write`, which opens a transaction
    and takes the store's writer lock. Each connection is checked (an empty query, one round trip)
    before the pool hands it out: a connection the server has closed since (a restart,
    ``pg_terminate_backend``, ``idle_session_timeout``) is replaced by a fresh one instead of failing
    the next read or write. A connection lost in the middle of a call still fails that call.

    Args:
        url: ``postgresql://user:password@host:port/dbname`` (any libpq URL or parameter string).
        what: What is stored ("replay buffer", "task pool"), for error messages.
        lock_table: The table whose ``EXCLUSIVE`` lock serialises this store's writers.
        timeout_s: Connect timeout, pool wait and writer-lock wait, in seconds.
        max_connections: Connections the pool may hold (one is opened at once, the rest on demand).
    """

    def __init__(
        self, url: str, *, what: str, lock_table: str, timeout_s: float = 30.0, max_connections: int = 4
    ) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as e:
            raise DependencyNotInstalled("psycopg", "postgres", f"A {what} in PostgreSQL") from e
        if timeout_s <= 0:
            raise StoreError(f"timeout_s must be positive, got {timeout_s!r}")
        self.url = url
        self.location = redact(url)
        self._local = threading.local()  # the connection of this thread's open transaction()
        self.what = what
        self._lock_table = lock_table
        self._lock_timeout_ms = max(int(timeout_s * 1000), 1)
        connect_kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(int(timeout_s), 1)}
        try:  # one direct connection first: its error says what is wrong (host, password, database)
            psycopg.connect(url, **connect_kwargs).close()
        except psycopg.Error as e:
            raise StoreError(f"cannot connect to the {what} at {self.location}: {scrub(str(e), url)}") from e
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(max_connections, 1),
            kwargs=connect_kwargs,
            timeout=timeout_s,
            open=True,
            name=f"dreamgym {what}",
            check=self._check,
        )

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection it is about to hand out; raises if the server closed it.

        One closed connection usually means every idle one is closed (the server restarted, or
        ``idle_session_timeout`` ended them all), and the pool waits a second, then two, then four
        between failed checks. So a failed check tests the rest of the idle connections at once
        (``ConnectionPool.check``), and the pool replaces them all without waiting.
        """
        from psycopg_pool import ConnectionPool

        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            logger.info(
                "A pooled connection to the %s at %s was closed by the server", self.what, self.location
            )
            self._pool.check()
            raise

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection for reads."""
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[psycopg.Connection[Any]]:
        """One write transaction holding this store's writer lock; committed whole or rolled back whole.

        Inside :meth:`transaction` on the same thread, a savepoint of that transaction instead.
        """
        outer = getattr(self._local, "conn", None)
        if outer is not None:
            with outer.transaction():
                yield outer
            return
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = {self._lock_timeout_ms}")
            conn.execute(f"LOCK TABLE {self._lock_table} IN EXCLUSIVE MODE")
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """Every :meth:`write` of this thread inside the block joins one transaction, committed at its end."""
        with self.write() as conn:
            if getattr(self._local, "conn", None) is not None:
                yield conn
                return
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    @contextmanager
    def setup(self, lock_key: int) -> Iterator[psycopg.Connection[Any]]:
        """A transaction for creating the schema, serialised by an advisory lock.

        ``CREATE TABLE IF NOT EXISTS`` run by two processes at once can still fail on the catalogue's
        unique index; the lock makes the first creator finish before the next one looks.
        """
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
            yield conn

    def run_setup(
        self, lock_key: int, body: Callable[[Any], None], *, meta_table: str, attempts: int = 5
    ) -> None:
        """Create the schema with ``body(conn)`` unless ``meta_table`` already records its version.

        Creating an index takes a ``SHARE`` lock on its table even when the index exists, and another
        process's writes (which lock the store's tables in their own order) can hold locks the other
        way round; PostgreSQL then aborts one side, possibly the writer. So a store whose schema is in
        place runs no DDL at all: the version row in ``meta_table`` is looked up first, and again under
        the advisory lock, so the processes queued behind the first creator skip too. A setup chosen
        as a deadlock victim is run again (its statements are idempotent), up to ``attempts``.
        """
        import psycopg

        def exists(conn: Any) -> bool:
            if conn.execute("SELECT to_regclass(%s)", (meta_table,)).fetchone()[0] is None:
                return False
            return (
                conn.execute(f"SELECT 1 FROM {meta_table} WHERE key = 'schema_version'").fetchone()
                is not None
            )

        with self.connection() as conn:
            if exists(conn):
                return
        for attempt in range(attempts):
            try:
                with self.setup(lock_key) as conn:
                    if not exists(conn):
                        body(conn)
                return
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                if attempt == attempts - 1:
                    raise
                logger.info(
                    "Schema setup of the %s at %s was a deadlock victim; retrying", self.what, self.location
                )
                time.sleep(0.05 * 2**attempt)

    def error(self, action: str, e: BaseException) -> StoreError:
        """A :class:`StoreError` for a failed ``action``, with the location redacted."""
        return StoreError(f"{action} the {self.what} at {self.location}: {scrub(str(e), self.url)}")

    def close(self) -> None:
        """Close every pooled connection (idempotent)."""
        self._pool.close()
