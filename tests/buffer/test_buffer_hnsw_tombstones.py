"""HNSW shards count only the evictions of ids they hold.

faiss's HNSW graph cannot delete, so an evicted id is a tombstone and the shard's size is the graph's
count minus its tombstones. A buffer also learns of evictions of rows it never indexed: another
process wrote and evicted them between two of its catch-ups (or before a restored snapshot was
built). Tombstoning those undercounted the shard, and past zero made ``len()`` raise.
"""

import numpy as np
import pytest

from dreamgym_env.buffer import IndexConfig, ReplayBuffer
from dreamgym_env.buffer.embedders import l2_normalize
from dreamgym_env.records import Transition

pytest.importorskip("faiss")

HNSW = {"kind": "hnsw", "min_train": 1}


def _tr(i: int) -> Transition:
    return Transition(
        domain="webshop", task_id="t", task="buy", episode_id=f"e{i}", step=0, state=f"page {i} of results",
        action=f"click[item {i}]", next_state=f"item {i}", source="sim",
    )  # fmt: skip


def test_removing_ids_the_graph_never_held_leaves_its_size_alone() -> None:
    from dreamgym_env.buffer.index import HNSWIndex

    rng = np.random.default_rng(0)
    vectors = l2_normalize(rng.normal(size=(5, 16)))
    index = HNSWIndex(16, IndexConfig(**HNSW))
    index.add(np.arange(1, 6, dtype=np.int64), vectors)
    index.remove(np.array([1, 100, 101], dtype=np.int64))
    assert len(index) == 4
    index.remove(np.arange(200, 220, dtype=np.int64))
    index.remove(np.array([1], dtype=np.int64))  # again: still one tombstone
    assert len(index) == 4
    found, _ = index.search(vectors[1], 10)
    assert sorted(found.tolist()) == [2, 3, 4, 5]


def test_a_shard_counts_rows_another_handle_added_and_evicted_correctly(store_location: str) -> None:
    with (
        ReplayBuffer.open(store_location, index=HNSW) as reader,
        ReplayBuffer.open(store_location, max_synthetic=5) as writer,
    ):
        reader.add_many([_tr(i) for i in range(3)])
        assert reader.index.shards["webshop"].kind == "hnsw"
        writer.add_many([_tr(i) for i in range(3, 10)])  # evicts 0..4; the reader never indexed 3 and 4
        assert len(reader.retrieve("x", "y", 10)) == 5
        assert len(reader.index) == 5
        assert reader.stats()["index"]["webshop"] == {"kind": "hnsw", "size": 5}


def test_more_unseen_evictions_than_live_rows_do_not_break_search(store_location: str) -> None:
    with (
        ReplayBuffer.open(store_location, index=HNSW) as reader,
        ReplayBuffer.open(store_location, max_synthetic=1) as writer,
    ):
        reader.add(_tr(0))
        for i in range(1, 11):
            writer.add(_tr(i))  # each add evicts the one before: the reader sees only the last
        found = reader.retrieve(_tr(10).state, _tr(10).action, 3)
        assert [t.action for t in found] == ["click[item 10]"]
        assert len(reader.index) == 1
