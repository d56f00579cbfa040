"""The shared store layer: SQLite opening, URL redaction, and PostgreSQL behind the same API."""

import json
import logging
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.curriculum.pool import TaskPool
from dreamgym_env.errors import StoreError
from dreamgym_env.experience.backends.recording import RecordingBackend
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.records import Task, Transition
from dreamgym_env.storage import is_postgres_url, open_sqlite, redact


def tr(i, name="w", source="sim"):
    return Transition(
        domain="d", task_id="t", task="x", episode_id=name, step=i, state=f"{name} state {i}",
        action="act", next_state=f"{name} next {i}", source=source,
    )  # fmt: skip


# ---------------------------------------------------------------- locations
def test_redact_hides_every_password_and_keeps_the_rest():
    assert redact("postgresql://u:s3cret@db:5432/runs") == "postgresql://u:**********@db:5432/runs"
    assert "s3cret" not in redact("postgres://u@db/runs?password=s3cret&sslmode=require")
    assert "sslmode=require" in redact("postgres://u@db/runs?password=s3cret&sslmode=require")
    assert redact("runs/buffer.sqlite") == "runs/buffer.sqlite"
    assert is_postgres_url("postgresql://h/db") and is_postgres_url("POSTGRES://h/db")
    assert not is_postgres_url("runs/buffer.sqlite") and not is_postgres_url(":memory:")


# ---------------------------------------------------------------- one SQLite opening for every store
def _settings(conn):
    return tuple(
        conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("journal_mode", "busy_timeout", "foreign_keys")
    )


def test_every_sqlite_store_opens_its_file_the_same_way(tmp_path):
    buffer = ReplayBuffer.open(tmp_path / "b.sqlite")
    pool = TaskPool(str(tmp_path / "p.sqlite"))
    recording = RecordingBackend(ScriptedBackend(), tmp_path / "r.sqlite", mode="record")
    try:
        for conn in (buffer.store._db._conn, pool._db._conn, recording._recording().conn):
            assert _settings(conn) == ("wal", 30000, 1)
    finally:
        buffer.close()
        pool.close()
        recording._recording().close()


@pytest.mark.parametrize("opener", ["buffer", "pool", "recording"])
def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path, opener):
    path = tmp_path / "notes.jsonl"
    path.write_text('{"state": "not a database"}\n' * 50)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a database"):
        if opener == "buffer":
            ReplayBuffer.open(path)
        elif opener == "pool":
            TaskPool(str(path))
        else:
            RecordingBackend(ScriptedBackend(), path, mode="record")._recording()
    assert path.read_bytes() == before


def test_open_sqlite_checks_its_settings(tmp_path):
    with pytest.raises(StoreError, match="synchronous"):
        open_sqlite(tmp_path / "x.sqlite", what="test", synchronous="OFF")
    with pytest.raises(StoreError, match="busy_timeout_s"):
        open_sqlite(tmp_path / "x.sqlite", what="test", busy_timeout_s=0)
    conn = open_sqlite(tmp_path / "deep" / "x.sqlite", what="test", create_parents=True, quick_check=True)
    assert _settings(conn) == ("wal", 30000, 1)
    conn.close()


# ---------------------------------------------------------------- PostgreSQL specifics
def test_a_wrong_password_is_a_clear_error_that_never_shows_the_password(postgres_url):
    bad = postgres_url.replace("dreamgym:", "dreamgym:wrong-Pa55word-", 1)
    with pytest.raises(StoreError) as info:
        ReplayBuffer.open(bad)
    assert "wrong-Pa55word" not in str(info.value)
    assert "password authentication failed" in str(info.value) and ":**********@" in str(info.value)


def test_logs_repr_and_stats_never_show_the_password(postgres_url, caplog):
    password = postgres_url.split(":")[2].split("@")[0]
    caplog.set_level(logging.DEBUG, logger="dreamgym_env")
    with ReplayBuffer.open(postgres_url, max_synthetic=2) as buffer, TaskPool(postgres_url) as pool:
        buffer.add_many([tr(i) for i in range(5)])  # evicts, which is logged with the location
        shown = [repr(buffer), str(buffer.stats()), repr(pool), pool.path, caplog.text]
    assert "evicted 3" in caplog.text
    assert all(password not in text for text in shown) and ":**********@" in repr(buffer)


def test_a_missing_driver_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"dreamgym-env\[postgres\]"):
        ReplayBuffer.open("postgresql://u:p@127.0.0.1:1/db")


# ---------------------------------------------------------------- catch-up while others write
WRITER = textwrap.dedent(
    """
    import sys
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.curriculum.pool import TaskPool
    from dreamgym_env.records import Task, Transition

    location, name, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with ReplayBuffer.open(location, busy_timeout_s=60) as buffer, TaskPool(location, 60) as pool:
        pool.add_tasks([Task(task_id="t", domain="webshop", instruction="buy")])
        for b in range(batches):
            buffer.add_many([
                Transition(domain="d", task_id="t", task="x", episode_id=name, step=b * 5 + i,
                           state=f"{name} state {b * 5 + i}", action="act", next_state="n", source="sim")
                for i in range(5)
            ])
            pool.record_outcome("t", float(b % 2), bool(b % 2))
    """
)


def test_a_reader_catching_up_while_processes_write_misses_nothing(tmp_path, store_location):
    """Ids and outcome numbers become visible in increasing order, so "after my watermark" is complete."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    with ReplayBuffer.open(store_location) as buffer, TaskPool(store_location) as pool:
        pool.add_tasks([Task(task_id="t", domain="webshop", instruction="buy")])
        procs = [
            subprocess.Popen([sys.executable, str(script), store_location, f"w{i}", "30"]) for i in range(4)
        ]
        caught_up: dict[int, float] = {}
        after = 0
        while True:
            running = any(p.poll() is None for p in procs)
            buffer.retrieve("w0 state 1", "act", 1)  # catches the index up with every commit so far
            for outcome in pool.recent_outcomes(10_000, after=after).get("t", []):
                caught_up[outcome.seq] = outcome.reward
            after = max(caught_up, default=after)
            time.sleep(0.02)
            if not running:
                break
        assert all(p.wait() == 0 for p in procs)
        buffer.retrieve("w0 state 1", "act", 1)
        for outcome in pool.recent_outcomes(10_000, after=after).get("t", []):
            caught_up[outcome.seq] = outcome.reward
        stored = {t.step for t in buffer.iter_transitions()}
        assert len(buffer) == 4 * 30 * 5 and len(stored) == 150
        assert len(buffer.index) == len(buffer)  # every committed row reached the index exactly once
        all_seqs = [o.seq for o in pool.outcomes()]
        assert len(all_seqs) == 4 * 30 and sorted(caught_up) == all_seqs  # nothing skipped


def test_rollout_workers_share_buffer_and_curriculum_without_ray(postgres_url):
    """The Ray actor class used in-process: worker B retrieves A's transition and counts A's outcomes."""
    from dreamgym_env.distributed import RolloutWorker
    from dreamgym_env.rollout import RandomPolicy

    kwargs = {"backend": "scripted", "max_steps": 2}
    stores = {"buffer": postgres_url, "task_pool": postgres_url, "curriculum_kwargs": {"min_rollouts": 1}}
    a = RolloutWorker("DreamGym/ALFWorld-v0", 2, kwargs, **stores)
    b = RolloutWorker("DreamGym/ALFWorld-v0", 2, kwargs, **stores)
    try:
        assert b.retrieve("anything", "look", 1) == []
        episodes = a.collect(RandomPolicy(fallback="look"), 2, seed=0)
        hit = b.retrieve(episodes[0].observations[0], episodes[0].actions[0], 1)[0]
        assert hit.episode_id in {ep.episode_id for ep in episodes}
        assert sum(b.curriculum_rollouts().values()) >= len(episodes)
    finally:
        a.close()
        b.close()


def test_the_curriculum_command_reads_a_pool_by_url(postgres_url, capsys):
    from dreamgym_env.cli import main

    with TaskPool(postgres_url) as pool:
        pool.add_tasks([Task(task_id="a0", domain="alfworld", instruction="put a mug in cabinet.")])
        pool.record_outcome("a0", 1.0, True)
    assert main(["curriculum", "stats", postgres_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pool_size"] == 1 and ":**********@" in report["path"]


def test_a_schema_setup_chosen_as_a_deadlock_victim_is_run_again(postgres_url):
    """Creating the tables while another process writes can deadlock; PostgreSQL aborts one side."""
    import psycopg

    from dreamgym_env.storage.postgres import PostgresPool

    pool = PostgresPool(postgres_url, what="task pool", lock_table="pool_probe", timeout_s=10)
    tries = []

    def create(conn):
        tries.append(1)
        conn.execute("CREATE TABLE IF NOT EXISTS pool_probe (id BIGINT)")
        if len(tries) < 3:
            raise psycopg.errors.DeadlockDetected("deadlock detected")

    try:
        pool.run_setup(1234, create, meta_table="pool_probe_meta")
        assert len(tries) == 3
        with pytest.raises(psycopg.errors.DeadlockDetected):
            tries.clear()
            pool.run_setup(1234, create, meta_table="pool_probe_meta", attempts=2)
    finally:
        pool.close()


def test_opening_a_store_whose_schema_exists_takes_no_lock_a_writer_holds(postgres_url):
    """A second process opening the pool or buffer while another writes must not run DDL against it.

    ``CREATE INDEX IF NOT EXISTS`` locks its table even when the index exists, which deadlocked with
    a writer holding the writer lock; with the schema in place, opening runs no DDL at all.
    """
    with TaskPool(postgres_url) as pool, ReplayBuffer.open(postgres_url) as buffer:
        opened: list[str] = []

        def open_both() -> None:
            with TaskPool(postgres_url, 5) as again, ReplayBuffer.open(postgres_url, busy_timeout_s=5) as b:
                opened.append(f"{len(again)} {len(b)}")

        with pool._db._db.write(), buffer.store._db.write():  # both writer locks held, as by a writer
            opener = threading.Thread(target=open_both)
            opener.start()
            opener.join(timeout=30)
            assert not opener.is_alive(), "opening a store with its schema in place waited on a writer's lock"
        assert opened == ["0 0"]
