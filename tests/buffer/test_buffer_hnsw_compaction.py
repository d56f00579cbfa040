"""HNSW shards are rebuilt from their live vectors once tombstones outnumber them.

faiss's HNSW graph cannot delete, so evictions are tombstones that stay in the graph: with
``max_synthetic`` they pile up without limit and every search asks the graph for ``k`` plus all of them.
Past ``hnsw_compact_ratio`` tombstones per live vector the shard is rebuilt (on the retrain thread by
default) and the rows added and evicted meanwhile are replayed into the new graph before it is swapped in.
"""

import threading

import numpy as np
import pytest
from pydantic import ValidationError

from dreamgym_env.buffer import BufferConfig, IndexConfig, ReplayBuffer
from dreamgym_env.buffer.embedders import l2_normalize
from dreamgym_env.buffer.index import HNSWIndex, ShardedIndex
from dreamgym_env.records import Transition

pytest.importorskip("faiss")

DIM = 32
# A beam wider than the shard makes the graph search exhaustive, so results can be compared exactly.
HNSW = {"kind": "hnsw", "min_train": 1, "ef_search": 1024}


class Store:
    """The rows a shard is rebuilt from: evicted rows leave it, as they leave the database."""

    def __init__(self, n: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.vectors = l2_normalize(rng.normal(size=(n, DIM)))
        self.live = set(range(1, n + 1))

    def rows(self, ids) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(sorted(ids), dtype=np.int64)
        return ids, self.vectors[ids - 1]

    def evict(self, index: ShardedIndex, ids) -> None:
        self.live.difference_update(ids)
        index.remove("a", np.asarray(ids, dtype=np.int64))

    def load_shard(self, domain: str, max_id: int) -> tuple[np.ndarray, np.ndarray]:
        return self.rows(i for i in self.live if i <= max_id)


def _exact_top(store: Store, query: np.ndarray, k: int) -> list[int]:
    ids, vectors = store.rows(store.live)
    return ids[np.argsort(-(vectors @ query), kind="stable")[:k]].tolist()


def _results(index: ShardedIndex, queries: np.ndarray) -> list[tuple[list[int], np.ndarray]]:
    return [(ids.tolist(), scores) for ids, scores in (index.search(q, 10, "a") for q in queries)]


def test_the_ratio_is_validated_with_a_message_naming_what_is_accepted() -> None:
    assert IndexConfig().hnsw_compact_ratio == 1.0
    assert IndexConfig(hnsw_compact_ratio=None).hnsw_compact_ratio is None
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValidationError, match="hnsw_compact_ratio must be a positive") as info:
            IndexConfig(hnsw_compact_ratio=bad)
        assert "None to never compact" in str(info.value)


def test_a_shard_is_compacted_inline_once_tombstones_outnumber_live_rows() -> None:
    store = Store(300)
    index = ShardedIndex(DIM, IndexConfig(**HNSW, background_retrain=False), store.load_shard)
    index.add("a", *store.rows(store.live))
    store.evict(index, range(1, 151))  # 150 tombstones, 150 live: not more, so no compaction yet
    shard = index.shards["a"]
    assert isinstance(shard, HNSWIndex) and (shard.graph_size, shard.tombstones, len(shard)) == (
        300,
        150,
        150,
    )
    store.evict(index, [151])
    shard = index.shards["a"]
    assert isinstance(shard, HNSWIndex) and (shard.graph_size, shard.tombstones, len(shard)) == (149, 0, 149)
    for q in store.vectors[::7]:
        assert index.search(q, 10, "a")[0].tolist() == _exact_top(store, q, 10)


def test_no_compaction_when_the_ratio_is_none() -> None:
    store = Store(100)
    index = ShardedIndex(DIM, IndexConfig(**HNSW, hnsw_compact_ratio=None), store.load_shard)
    index.add("a", *store.rows(store.live))
    store.evict(index, range(1, 100))
    assert index.retraining() == [] and index.shards["a"].graph_size == 100
    assert index.search(store.vectors[99], 5, "a")[0].tolist() == [100]


def test_a_background_compaction_keeps_rows_added_and_evicted_meanwhile() -> None:
    store = Store(400)
    store.live = set(range(1, 301))  # 301..400 come while the graph is rebuilt
    read, gate = threading.Event(), threading.Event()
    threads = []

    def load_shard(domain: str, max_id: int) -> tuple[np.ndarray, np.ndarray]:
        rows = store.load_shard(domain, max_id)  # read now: rows evicted from here on are in it
        threads.append(threading.current_thread() is threading.main_thread())
        read.set()
        assert gate.wait(30)
        return rows

    index = ShardedIndex(DIM, IndexConfig(**HNSW, hnsw_compact_ratio=0.5), load_shard)
    index.add("a", *store.rows(store.live))
    old = index.shards["a"]
    store.evict(index, range(1, 102))  # 101 tombstones > 0.5 * 199 live: the rebuild starts
    assert read.wait(30) and threads == [False]
    assert index.retraining() == ["a"]

    store.live.update(range(301, 341))
    index.add("a", *store.rows(range(301, 341)))
    store.evict(index, [150, 305])  # one row the rebuild read, one it never saw, ...
    store.evict(index, range(160, 200))  # ... and past the ratio again: still one rebuild
    store.evict(index, [99999])  # never indexed: ignored, by the old graph and the new one
    assert index.shards["a"] is old and index.retraining() == ["a"]
    queries = store.vectors[::9]
    before = _results(index, queries)  # served by the old graph, tombstones and all

    gate.set()
    assert index.wait_for_retrain(timeout=30)
    new = index.shards["a"]
    assert isinstance(new, HNSWIndex) and new is not old and index.retraining() == []
    live = sorted(store.live)
    assert len(live) == 197 and len(new) == 197
    # The graph holds what the rebuild read (the 199 live when it started) plus the 40 added since;
    # the 42 evicted since are tombstones until the next compaction.
    assert (new.graph_size, new.tombstones) == (239, 42)
    assert sorted(index.search(store.vectors[0], 1000, "a")[0].tolist()) == live
    after = _results(index, queries)
    assert [ids for ids, _ in after] == [ids for ids, _ in before]
    for (_, b), (_, a) in zip(before, after, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)
    for q in queries:
        assert index.search(q, 10, "a")[0].tolist() == _exact_top(store, q, 10)

    store.evict(index, range(200, 260))  # 102 tombstones > 0.5 * 137 live: compacts to the live rows
    assert index.wait_for_retrain(timeout=30)
    assert (index.shards["a"].graph_size, index.shards["a"].tombstones) == (137, 0)


def test_a_failed_compaction_keeps_the_old_graph_and_waits_for_twice_the_tombstones(caplog) -> None:
    store = Store(700)
    store.live = set(range(1, 601))
    calls = []

    def load_shard(domain: str, max_id: int) -> tuple[np.ndarray, np.ndarray]:
        calls.append(max_id)
        if len(calls) == 1:
            raise OSError("disk gone")
        return store.load_shard(domain, max_id)

    index = ShardedIndex(DIM, IndexConfig(**HNSW), load_shard)
    index.add("a", *store.rows(store.live))
    old = index.shards["a"]
    store.evict(index, range(1, 302))  # 301 tombstones > 299 live: the rebuild starts, and fails
    assert index.wait_for_retrain(timeout=30)
    assert calls == [600] and index.shards["a"] is old and "disk gone" in caplog.text
    store.evict(index, range(302, 590))  # 589 tombstones, 11 live: not past twice the failed 301
    assert calls == [600] and index.retraining() == []
    assert index.search(store.vectors[599], 1, "a")[0].tolist() == [600]
    store.live.update(range(601, 701))
    index.add("a", *store.rows(range(601, 701)))
    store.evict(index, range(590, 605))  # 604 tombstones > 602: tried again
    assert index.wait_for_retrain(timeout=30) and calls == [600, 700]
    assert (index.shards["a"].graph_size, index.shards["a"].tombstones) == (96, 0)


def _tr(i: int) -> Transition:
    return Transition(
        domain="webshop", task_id="t", task="buy", episode_id=f"e{i}", step=0,
        state=f"[results] page {i}: shoes size {i % 13} color {i % 7}", action=f"click[item {i}]",
        next_state=f"item {i}", source="sim",
    )  # fmt: skip


def _queries() -> list[tuple[str, str]]:
    return [(_tr(i).state, _tr(i).action) for i in range(0, 320, 11)]


def _answers(buffer: ReplayBuffer) -> list[list[str]]:
    return [[t.action for t in buffer.retrieve(s, a, 5)] for s, a in _queries()]


def _exact_answers(path: str) -> list[list[str]]:
    """What brute-force search over the same file answers: the reference for every HNSW answer."""
    with ReplayBuffer.open(path, index={"kind": "exact"}) as exact:
        return _answers(exact)


def test_a_buffer_evicting_synthetic_rows_compacts_and_its_snapshot_reopens_right(tmp_path) -> None:
    path = str(tmp_path / "b.sqlite")
    config = BufferConfig(path=path, max_synthetic=100, index=IndexConfig(**HNSW))
    with ReplayBuffer(config) as buffer:
        buffer.add_many([_tr(i) for i in range(100)])
        buffer.add_many([_tr(i) for i in range(100, 200)])  # 100 evicted: as many as live, no compaction
        assert buffer.index.shards["webshop"].graph_size == 200
        buffer.add(_tr(200))  # 101 evicted
        assert buffer.wait_for_index(timeout=30)
        shard = buffer.index.shards["webshop"]
        assert (shard.graph_size, len(shard)) == (100, 100)
        expected = _exact_answers(path)
        assert _answers(buffer) == expected
    assert list((tmp_path / "b.sqlite.index").glob("*.hnsw.*.faiss"))
    with ReplayBuffer(config) as buffer:  # the compacted graph, with 101 evictions replayed over it
        shard = buffer.index.shards["webshop"]
        assert (shard.graph_size, shard.tombstones, len(shard)) == (100, 0, 100)
        assert _answers(buffer) == expected
        buffer.add_many([_tr(i) for i in range(201, 320)])
        assert buffer.wait_for_index(timeout=30) and len(buffer.index) == 100
        assert _answers(buffer) == _exact_answers(path)


def test_a_snapshot_saved_while_a_compaction_runs_reopens_right(tmp_path) -> None:
    path = str(tmp_path / "b.sqlite")
    config = BufferConfig(path=path, max_synthetic=100, index=IndexConfig(**HNSW))
    gate = threading.Event()
    with ReplayBuffer(config) as buffer:
        load_shard = buffer.index._load_shard

        def gated(domain: str, max_id: int) -> tuple[np.ndarray, np.ndarray]:
            assert gate.wait(30)
            return load_shard(domain, max_id)

        buffer.index._load_shard = gated
        buffer.add_many([_tr(i) for i in range(100)])
        buffer.add_many([_tr(i) for i in range(100, 201)])  # 101 evicted: the rebuild starts, and waits
        assert buffer.index.retraining() == ["webshop"]
        buffer.save_index()  # the old graph, tombstones and all
        with ReplayBuffer(config) as reader:  # loads it, replays the 101 evictions, and compacts it
            shard = reader.index.shards["webshop"]
            assert (shard.graph_size, shard.tombstones) == (201, 101)
            assert reader.index.retraining() == ["webshop"]
            assert reader.wait_for_index(timeout=30)
            assert (reader.index.shards["webshop"].graph_size, len(reader.index)) == (100, 100)
            assert _answers(reader) == _exact_answers(path)
        buffer.add_many([_tr(i) for i in range(201, 211)])  # 10 more evicted meanwhile
        gate.set()
        assert buffer.wait_for_index(timeout=30)
        shard = buffer.index.shards["webshop"]
        assert (shard.graph_size, len(shard)) == (100, 100)
        expected = _exact_answers(path)
        assert _answers(buffer) == expected
        buffer.index._load_shard = load_shard
    with ReplayBuffer(config) as buffer:  # the compacted graph saved on close
        assert (buffer.index.shards["webshop"].graph_size, len(buffer.index)) == (100, 100)
        assert _answers(buffer) == expected
