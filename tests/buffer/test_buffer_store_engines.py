"""The transition store's contract, the same on SQLite and PostgreSQL (one statement text, two engines)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from dreamgym_env.buffer.store import open_store
from dreamgym_env.errors import StoreError
from dreamgym_env.records import Transition


def _batch(episode: str, n: int, source: str = "sim") -> tuple[list[Transition], list[bytes], np.ndarray]:
    transitions = [
        Transition(
            domain="d",
            task_id="t",
            task="task",
            episode_id=episode,
            step=i,
            state=f"{episode} state {i}",
            action="a",
            next_state="n",
            source=source,  # type: ignore[arg-type]
            done=i == n - 1,
            metadata={"i": i},
        )
        for i in range(n)
    ]
    keys = [hashlib.sha256(f"{episode}/{i}".encode()).digest() for i in range(n)]
    vectors = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    return transitions, keys, vectors


@pytest.fixture
def store(store_location):
    s = open_store(store_location)
    yield s
    s.close()


def test_reads_answer_alike_on_both_engines(store):
    transitions, keys, vectors = _batch("e1", 3)
    ids, evicted = store.insert(transitions, keys, vectors)
    assert evicted == [] and all(isinstance(i, int) for i in ids)
    assert store.max_id() == max(i for i in ids if i is not None)
    again, _ = store.insert(transitions[:1], keys[:1], vectors[:1])
    assert again == [None]  # a known dedup key is skipped
    assert (
        store.count() == 3 and store.count(domain="d", source="sim") == 3 and store.count(source="real") == 0
    )
    assert store.stats() == [("d", "sim", 3)]
    got = store.get([np.int64(ids[2]), ids[0], 10**9])  # numpy ids work; unknown ids are absent
    assert list(got) == [ids[2], ids[0]] and got[ids[0]] == transitions[0]
    assert store.episode_row_ids(["e1", "nope"]) == {"e1": set(ids), "nope": set()}
    (rows,) = list(store.rows_after(0))
    assert [r.id for r in rows] == ids
    np.testing.assert_array_equal(rows[1].embedding, vectors[1])
    assert list(store.iter_transitions(source="sim", batch_size=2)) == transitions
    assert [p for batch in store.iter_pairs(batch_size=2) for p in batch] == [
        (i, t.state, t.action) for i, t in zip(ids, transitions, strict=True)
    ]


def test_eviction_keeps_the_newest_synthetic_rows_and_logs_the_rest(store):
    first, _ = store.insert(*_batch("e1", 3))
    _, evicted = store.insert(*_batch("e2", 2), max_synthetic=3)
    assert evicted == first[:2]
    assert store.count() == 3
    assert [(i, d) for _, i, d in store.evictions_after(0)] == [(first[0], "d"), (first[1], "d")]
    assert store.max_eviction_seq() == store.evictions_after(0)[-1][0]


def test_set_reasoning_counts_the_rows_it_changed(store):
    store.insert(*_batch("e1", 3))
    assert store.set_reasoning([("e1", 0, "because"), ("e1", 2, "so"), ("missing", 0, "x")]) == 2
    assert [t.reasoning for t in store.iter_transitions()] == ["because", None, "so"]
    assert store.set_reasoning([]) == 0


def test_replace_embeddings_overwrites_the_vectors(store):
    ids, _ = store.insert(*_batch("e1", 2))
    store.replace_embeddings([(ids[0], np.ones(4, dtype=np.float32))])
    (rows,) = list(store.rows_after(0))
    np.testing.assert_array_equal(rows[0].embedding, np.ones(4, dtype=np.float32))


def test_set_meta_inside_a_transaction_rolls_back_with_it(store):
    """A setting written inside ``transaction()`` commits with the block's other writes, or not at all."""
    store.set_meta("k", "before")
    with pytest.raises(RuntimeError), store.transaction():
        store.insert(*_batch("e1", 1))
        store.set_meta("k", "inside")
        raise RuntimeError("abort")
    assert store.get_meta("k") == "before"
    assert store.count() == 0
    store.set_meta("k", "after")
    assert store.get_meta("k") == "after"


def test_a_refused_batch_is_a_store_error_and_writes_nothing(store):
    transitions, keys, vectors = _batch("e1", 2)
    bad = transitions[1].model_copy(update={"source": "bogus"})  # past validation: the CHECK refuses it
    with pytest.raises(StoreError, match="could not write 2 transitions to"):
        store.insert([transitions[0], bad], keys, vectors)
    assert store.count() == 0
