"""A PostgreSQL store survives the server closing its idle pooled connections.

The server drops a client's connection when it restarts, when an administrator terminates the
backend, or when ``idle_session_timeout`` runs out. The pool checks a connection before handing it
out, so the next read or write opens a fresh one instead of failing once on the dead one.
"""

import psycopg
import pytest

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.curriculum.pool import TaskPool
from dreamgym_env.records import Task, Transition


def _transition(i: int) -> Transition:
    return Transition(
        domain="d", task_id="t", task="x", episode_id="e", step=i, state=f"state {i}", action="act",
        next_state=f"next {i}", source="sim",
    )  # fmt: skip


def _terminate_other_backends(url: str) -> int:
    """Terminate every other session on ``url``'s database, as a server restart would; how many."""
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return sum(1 for (ok,) in rows if ok)


def test_replay_buffer_reads_and_writes_after_its_connections_are_terminated(postgres_url: str) -> None:
    buffer = ReplayBuffer.open(postgres_url)
    try:
        buffer.add(_transition(0))
        assert _terminate_other_backends(postgres_url) >= 1
        buffer.add(_transition(1))  # a write on a fresh connection
        assert _terminate_other_backends(postgres_url) >= 1
        assert len(buffer) == 2
        assert buffer.stats()["transitions"] == 2
    finally:
        buffer.close()
    with ReplayBuffer.open(postgres_url) as reopened:
        assert len(reopened) == 2


def test_task_pool_reads_and_writes_after_its_connections_are_terminated(postgres_url: str) -> None:
    pool = TaskPool(postgres_url)
    try:
        pool.add_tasks([Task(task_id="a", domain="d", instruction="do a")])
        assert _terminate_other_backends(postgres_url) >= 1
        assert len(pool) == 1  # a read on a fresh connection
        assert _terminate_other_backends(postgres_url) >= 1
        pool.record_outcome("a", 1.0, True)  # a write on a fresh connection
        assert pool.episode_count() == 1
    finally:
        pool.close()


def _live_backends(url: str) -> set[int]:
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return {pid for (pid,) in rows}


@pytest.mark.parametrize("opener", ["buffer", "pool"])
def test_one_failed_check_replaces_every_closed_idle_connection_without_back_off(
    postgres_url: str, opener: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart every idle connection is dead: the first failed check clears them all.

    psycopg_pool sleeps 1 s, 2 s, 4 s... between failed checks, so finding four dead connections one
    check at a time would stall the first call for 7 s.
    """
    import psycopg_pool.pool

    pauses: list[float] = []
    real_sleep = psycopg_pool.pool.sleep

    def recorded_sleep(seconds: float) -> None:
        pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(psycopg_pool.pool, "sleep", recorded_sleep)
    store = ReplayBuffer.open(postgres_url) if opener == "buffer" else TaskPool(postgres_url)
    db = (store.store if opener == "buffer" else store)._db._db
    try:
        held = [db._pool.getconn() for _ in range(3)]  # three live connections, then idle in the pool
        for conn in held:
            db._pool.putconn(conn)
        dead = {conn.info.backend_pid for conn in held}
        assert _terminate_other_backends(postgres_url) >= 3
        assert len(store) == 0
        assert max(pauses, default=0.0) == 0.0, pauses
        idle = {conn.info.backend_pid for conn in db._pool._pool}
        assert not idle & dead
        assert idle <= _live_backends(postgres_url)
        assert len(store) == 0
    finally:
        store.close()


def test_replay_buffer_keeps_working_across_a_server_restart(postgres_cluster, postgres_url: str) -> None:
    """``pg_ctl restart``: every pooled connection dies; the next search and write need no reopen."""
    assert postgres_cluster.directory is not None
    buffer = ReplayBuffer.open(postgres_url)
    try:
        buffer.add(_transition(0))
        data, log = (str(postgres_cluster.directory / name) for name in ("data", "server.log"))
        # -l: the restarted server writes to the log, not to pipes pg_ctl's caller waits on
        postgres_cluster._run("pg_ctl", "-D", data, "-l", log, "-m", "fast", "-w", "-t", "60", "restart")
        assert len(buffer.search("state 0", "act", k=1)) == 1
        buffer.add(_transition(1))
        assert buffer.stats()["transitions"] == 2
    finally:
        buffer.close()
