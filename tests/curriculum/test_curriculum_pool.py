import os
import sqlite3

import pytest

from dreamgym_env.curriculum import Rejection, TaskPool, task_family
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import StoreError
from dreamgym_env.records import Task


def _task(i, **kw):
    return Task(task_id=f"t{i}", domain="webshop", instruction=f"buy item number {i} please", **kw)


def test_pool_survives_reopen_with_lineage_and_history(store_location):
    path = store_location
    with TaskPool(path) as pool:
        assert pool.add_tasks([_task(0), _task(1)], origin="seed") == 2
        child = _task(2, parent_id="t0", source="generated")
        pool.add_tasks([child], origin="generated")
        pool.add_tasks([_task(3, parent_id="t2", source="generated")], origin="generated")
        for r in (1.0, 0.0, 1.0):
            pool.record_outcome("t0", r, r > 0)
        pool.record_rejections([Rejection("validator", "bad price", {"price_upper": -1}, "t0", "webshop")])

    with TaskPool(path) as pool:
        assert len(pool) == 4
        assert pool.count(origin="seed") == 2 and pool.count(origin="generated") == 2
        assert pool.get("t2").task.parent_id == "t0" and pool.get("t2").depth == 1
        assert pool.get("t3").depth == 2
        assert pool.get("t2").created_episode == 0
        assert [o.reward for o in pool.outcomes(task_id="t0")] == [1.0, 0.0, 1.0]
        assert pool.rejection_counts() == {"validator": 1}
        assert pool.rejections()[0].candidate == {"price_upper": -1}
    if not path.startswith("postgresql://"):
        assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_seeding_again_is_a_no_op(store_location):
    with TaskPool(store_location) as pool:
        seeds = get_domain("alfworld").seed_tasks()
        assert pool.add_tasks(seeds) == len(seeds)
        assert pool.add_tasks(seeds) == 0
        assert len(pool) == len(seeds)


def test_recent_outcomes_keeps_latest_n_newest_first_and_filters_domain(store_location):
    with TaskPool(store_location) as pool:
        pool.add_tasks([_task(0), Task(task_id="a0", domain="alfworld", instruction="put a mug in cabinet.")])
        for i in range(10):
            pool.record_outcome("t0", float(i), False)
        pool.record_outcome("a0", 1.0, True)
        recent = pool.recent_outcomes(3, domain="webshop")
        assert list(recent) == ["t0"]
        assert [o.reward for o in recent["t0"]] == [9.0, 8.0, 7.0]
        assert pool.episode_count() == 11


def test_created_episode_tracks_growth(store_location):
    with TaskPool(store_location) as pool:
        pool.add_tasks([_task(0)])
        pool.record_outcome("t0", 1.0, True)
        pool.record_outcome("t0", 0.0, False)
        pool.add_tasks([_task(1, parent_id="t0")], origin="generated")
        assert pool.get("t1").created_episode == 2


def test_schema_version_mismatch_is_reported(tmp_path):
    path = str(tmp_path / "pool.sqlite")
    TaskPool(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE curriculum_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        TaskPool(path)


def test_pool_can_share_the_replay_buffer_file(tmp_path):
    from dreamgym_env.buffer.store import TransitionStore

    path = str(tmp_path / "shared.sqlite")
    store = TransitionStore(path)
    pool = TaskPool(path)
    pool.add_tasks([_task(0)])
    assert len(pool) == 1
    pool.close()
    store.close()
    assert os.path.exists(path)


def test_bad_origin_and_unserialisable_metadata_raise(store_location):
    with TaskPool(store_location) as pool:
        with pytest.raises(StoreError, match="origin"):
            pool.add_tasks([_task(0)], origin="mystery")
        with pytest.raises(StoreError, match="JSON"):
            pool.add_tasks([_task(1, metadata={"x": object()})])
        assert len(pool) == 0  # the failed batch left nothing behind


def test_task_family_per_domain():
    ws, alf, wa = (get_domain(d).seed_tasks()[0] for d in ("webshop", "alfworld", "webarena"))
    assert task_family(ws) == "webshop/fashion"
    assert task_family(alf) == "alfworld/pick_and_place_simple"
    assert task_family(wa) == "webarena/shopping"
    assert task_family(Task(task_id="x", domain="toy", instruction="go")) == "toy"
