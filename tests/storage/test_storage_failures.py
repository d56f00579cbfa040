"""Failure paths of the SQLite and PostgreSQL stores: what a failed commit, rollback or setup leaves behind."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest

from dreamgym_env.buffer.store import TransitionStore
from dreamgym_env.curriculum.pool import TaskPool
from dreamgym_env.errors import StoreError
from dreamgym_env.records import Transition
from dreamgym_env.storage import open_sqlite, write_transaction
from dreamgym_env.storage.pg_cluster import TemporaryPostgres


def _batch(episode: str, n: int = 2):
    transitions = [
        Transition(
            domain="d", task_id="t", task="task", episode_id=episode, step=i, state=f"{episode} {i}",
            action="a", next_state="n", source="sim",
        )
        for i in range(n)
    ]  # fmt: skip
    keys = [hashlib.sha256(f"{episode}/{i}".encode()).digest() for i in range(n)]
    return transitions, keys, np.ones((n, 4), dtype=np.float32)


def _deny_commit(action, arg1, *_):
    """An authorizer that refuses COMMIT: the statement fails and SQLite keeps the transaction open."""
    if action == sqlite3.SQLITE_TRANSACTION and arg1 == "COMMIT":
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class _InterruptFirstInsert:
    """Interrupts the first INSERT run on ``conn``, once (the authorizer sees it prepared, then the
    progress handler stops it).

    An interrupted write inside an explicit transaction makes SQLite roll the whole transaction back by
    itself (as it may on a full disk or an I/O error), so a ROLLBACK after it finds none.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.armed, self.fired = conn, False, False
        conn.set_authorizer(self.authorize)
        conn.set_progress_handler(self.progress, 1)

    def authorize(self, action, *_):
        if action == sqlite3.SQLITE_INSERT and not self.fired:
            self.armed = True
        return sqlite3.SQLITE_OK

    def progress(self) -> int:
        if not self.armed or self.fired:
            return 0
        self.fired = True
        return 1

    def remove(self) -> None:
        self.conn.set_authorizer(None)
        self.conn.set_progress_handler(None, 1)


# ---------------------------------------------------------------- the replay buffer's SQLite store
def test_a_failed_commit_releases_the_write_lock_and_the_store_keeps_working(tmp_path):
    path = str(tmp_path / "b.sqlite")
    store = TransitionStore(path)
    other = TransitionStore(path, busy_timeout_s=0.5)
    try:
        store._db._conn.set_authorizer(_deny_commit)
        with pytest.raises(StoreError):
            store.insert(*_batch("lost"))
        store._db._conn.set_authorizer(None)
        assert not store._db._conn.in_transaction  # rolled back, not left holding the file's write lock
        other.insert(*_batch("other"))  # another writer gets the lock at once
        store.insert(*_batch("kept"))  # and this store can still write
        assert store.count() == 4
        assert store.episode_row_ids(["lost"]) == {"lost": set()}
    finally:
        store.close()
        other.close()


def test_an_error_after_sqlite_rolled_back_by_itself_is_reported_as_it_was(tmp_path):
    store = TransitionStore(str(tmp_path / "b.sqlite"))
    try:
        interrupt = _InterruptFirstInsert(store._db._conn)
        with pytest.raises(StoreError, match="interrupted"):
            store.insert(*_batch("gone"))
        interrupt.remove()
        store.insert(*_batch("kept"))
        assert store.count() == 2
    finally:
        store.close()


def test_a_failed_commit_inside_a_transaction_block_rolls_it_back(tmp_path):
    store = TransitionStore(str(tmp_path / "b.sqlite"))
    try:
        with pytest.raises(sqlite3.Error), store.transaction():
            store.insert(*_batch("a"))
            store._db._conn.set_authorizer(_deny_commit)
        store._db._conn.set_authorizer(None)
        assert not store._db._conn.in_transaction
        assert store.count() == 0
        store.insert(*_batch("b"))
        assert store.count() == 2
    finally:
        store.close()


def test_reads_of_a_closed_sqlite_store_are_store_errors(tmp_path):
    store = TransitionStore(str(tmp_path / "b.sqlite"))
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.count()


# ---------------------------------------------------------------- storage.sqlite.write_transaction
def test_write_transaction_rolls_back_a_commit_that_failed(tmp_path):
    conn = open_sqlite(tmp_path / "x.sqlite", what="test")
    conn.execute("CREATE TABLE t (x)")
    conn.set_authorizer(_deny_commit)
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"), write_transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    conn.set_authorizer(None)
    assert not conn.in_transaction
    with write_transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
    assert conn.execute("SELECT x FROM t").fetchall() == [(2,)]
    conn.close()


def test_write_transaction_keeps_the_error_when_sqlite_already_rolled_back(tmp_path):
    conn = open_sqlite(tmp_path / "x.sqlite", what="test")
    conn.execute("CREATE TABLE t (x)")
    interrupt = _InterruptFirstInsert(conn)
    with pytest.raises(sqlite3.OperationalError, match="interrupted"), write_transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    interrupt.remove()
    assert interrupt.fired and not conn.in_transaction
    conn.close()


def test_the_task_pool_survives_a_failed_commit(tmp_path):
    pool = TaskPool(str(tmp_path / "p.sqlite"))
    try:
        pool._db._conn.set_authorizer(_deny_commit)
        with pytest.raises(StoreError, match="not authorized"):
            pool.record_outcome("t", 1.0, True)
        pool._db._conn.set_authorizer(None)
        assert pool.record_outcome("t", 0.0, False) >= 1
        assert pool.episode_count() == 1
    finally:
        pool.close()


# ---------------------------------------------------------------- the same question on both engines
def test_a_negative_rejection_limit_is_refused_on_every_engine(store_location):
    pool = TaskPool(store_location)
    try:
        with pytest.raises(StoreError, match="limit"):
            pool.rejections(limit=-1)
        assert pool.rejections(limit=0) == []
    finally:
        pool.close()


# ---------------------------------------------------------------- the throwaway PostgreSQL cluster
def test_a_cluster_whose_initdb_fails_leaves_no_directory_behind(tmp_path, monkeypatch):
    # Under root the tools run as another account: the fake ones live where it can read them.
    bindir = Path(tempfile.mkdtemp(prefix="fake-pg-bin-"))
    bindir.chmod(0o755)
    for tool in ("initdb", "pg_ctl"):
        script = bindir / tool
        script.write_text("#!/bin/sh\necho 'initdb: broken on purpose' >&2\nexit 1\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    made = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):
        made.append(real_mkdtemp(*args, dir=str(tmp_path), **kwargs))
        return made[-1]

    monkeypatch.setattr("dreamgym_env.storage.pg_cluster.tempfile.mkdtemp", mkdtemp)
    cluster = TemporaryPostgres(bindir)
    with pytest.raises(StoreError, match="broken on purpose"):
        cluster.start()
    try:
        assert made and not os.path.exists(made[0])  # nor the password file it held
        assert cluster.directory is None
    finally:
        shutil.rmtree(bindir, ignore_errors=True)


# ---------------------------------------------------------------- where a location is shown
def test_a_buffer_config_never_shows_the_password_of_its_url():
    from dreamgym_env.buffer.config import BufferConfig

    config = BufferConfig(path="postgresql://u:s3cret@db:5432/runs", k=3)
    shown = [repr(config), str(config), f"{config!r}"]
    assert all("s3cret" not in text for text in shown)
    assert all("postgresql://u:**********@db:5432/runs" in text for text in shown)
    assert config.path == "postgresql://u:s3cret@db:5432/runs"  # the store still gets the real URL
    assert "k=3" in repr(config)


def test_lookups_of_more_ids_than_sqlite_binds_in_one_statement_answer_as_on_postgresql(store_location):
    """SQLite binds at most 32,766 parameters per statement; PostgreSQL takes the list as one array."""
    from dreamgym_env.buffer.store import open_store

    n = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) + 1_000
    store = open_store(store_location)
    try:
        ids, _ = store.insert(*_batch("e", 3))
        wanted = [*range(10**7, 10**7 + n), *[i for i in ids if i is not None]]
        assert sorted(store.get(wanted)) == sorted(i for i in ids if i is not None)
        episodes = [f"none-{i}" for i in range(n)] + ["e"]
        found = store.episode_row_ids(episodes)
        assert len(found) == n + 1 and found["e"] == {i for i in ids if i is not None}
    finally:
        store.close()


def test_an_interrupted_begin_leaves_no_transaction_open(tmp_path):
    """SQLite can open the transaction and still fail BEGIN (interrupted): the next write must not find it."""
    conn = open_sqlite(tmp_path / "x.sqlite", what="test")
    conn.execute("CREATE TABLE t (x)")
    fired = []

    def interrupt_once_in_transaction() -> int:
        if fired or not conn.in_transaction:
            return 0
        fired.append(True)
        return 1

    conn.set_progress_handler(interrupt_once_in_transaction, 1)
    with pytest.raises(sqlite3.OperationalError, match="interrupted"), write_transaction(conn):
        pytest.fail("the body must not run when BEGIN failed")  # pragma: no cover
    conn.set_progress_handler(None, 1)
    assert fired and not conn.in_transaction
    with write_transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    conn.close()


def test_write_transaction_refuses_a_connection_already_in_a_transaction(tmp_path):
    conn = open_sqlite(tmp_path / "x.sqlite", what="test")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(StoreError, match="already in a transaction"), write_transaction(conn):
        pytest.fail("the body must not run")  # pragma: no cover
    assert conn.in_transaction  # the caller's transaction is left alone
    conn.execute("COMMIT")
    assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    conn.close()
