"""Index snapshots that must not outlive their database, atomic re-embedding, stale temporary files,
and IVF retraining off the caller's thread."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from dreamgym_env.buffer import BufferConfig, HashingEmbedder, IndexConfig, ReplayBuffer
from dreamgym_env.buffer.embedders import l2_normalize
from dreamgym_env.buffer.index import ShardedIndex
from dreamgym_env.errors import StoreError
from dreamgym_env.records import Transition

faiss = pytest.importorskip("faiss")


def tr(i, tag="a", domain="webshop"):
    return Transition(
        domain=domain,
        task_id="t",
        task="buy shoes",
        episode_id=f"{tag}{i // 5}",
        step=i % 5,
        state=f"[{tag} results] page 1: {tag} item {i} shoes size {i % 13}",
        action=f"click[{tag} {i}]",
        next_state=f"[item page] {tag} {i}",
        source="offline",
    )


def _ivf(path, **index):
    return BufferConfig(path=str(path), index=IndexConfig(kind="ivf", min_train=200, nprobe=64, **index))


def _all_ids(buffer):
    ids, _ = buffer.index.search(np.ones(buffer.embedder.dim, dtype=np.float32), 100_000, "webshop")
    return sorted(ids.tolist())


def test_snapshot_of_a_deleted_database_is_not_loaded_into_a_new_one(tmp_path):
    path = tmp_path / "b.sqlite"
    with ReplayBuffer(_ivf(path)) as buffer:
        buffer.add_many([tr(i, "old") for i in range(600)])
    assert list((tmp_path / "b.sqlite.index").glob("*.faiss"))
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"b.sqlite{suffix}").unlink(missing_ok=True)
    with ReplayBuffer(_ivf(path)) as buffer:  # a new database at the same path, the old folder left
        buffer.add_many([tr(i, "new") for i in range(300)])
    with ReplayBuffer(_ivf(path)) as buffer:
        assert _all_ids(buffer) == list(range(1, 301))
        hit = buffer.retrieve(tr(250, "new").state, tr(250, "new").action, 1)[0]
        assert hit.action == "click[new 250]"


def test_snapshot_newer_than_a_restored_backup_is_rebuilt(tmp_path):
    path = tmp_path / "b.sqlite"
    with ReplayBuffer(_ivf(path)) as buffer:
        buffer.add_many([tr(i) for i in range(600)])
    shutil.copy(path, tmp_path / "backup.sqlite")
    with ReplayBuffer(_ivf(path)) as buffer:
        buffer.add_many([tr(i) for i in range(600, 700)])
    assert any(".w700." in p.name for p in (tmp_path / "b.sqlite.index").iterdir())
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"b.sqlite{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "backup.sqlite", path)  # the snapshot folder now covers rows the file lacks
    with ReplayBuffer(_ivf(path)) as buffer:
        buffer.add_many([tr(i, "z") for i in range(50)])  # reuses ids 601..650 for other rows
    with ReplayBuffer(_ivf(path)) as buffer:
        assert _all_ids(buffer) == list(range(1, 651))
        assert buffer.retrieve(tr(20, "z").state, tr(20, "z").action, 1)[0].action == "click[z 20]"
        assert buffer.retrieve(tr(680).state, tr(680).action, 1)[0].action != "click[a 680]"


KILLING_EMBEDDER = textwrap.dedent(
    """
    import os, signal, sys
    from dreamgym_env.buffer import HashingEmbedder, ReplayBuffer

    class Dying(HashingEmbedder):
        calls = 0
        def embed(self, texts):
            Dying.calls += 1
            if Dying.calls > int(sys.argv[2]):
                os.kill(os.getpid(), signal.SIGKILL)
            return super().embed(texts)

    ReplayBuffer.open(sys.argv[1], embedder=Dying(dim=64))
    """
)


def test_a_kill_mid_reembedding_leaves_the_old_embeddings_and_the_file_opens(tmp_path):
    path = tmp_path / "b.sqlite"
    n = 12_500  # more than one re-embedding batch
    with ReplayBuffer.open(path, index={"kind": "exact"}) as buffer:
        buffer.add_many([tr(i) for i in range(n)])
    script = tmp_path / "dying.py"
    script.write_text(KILLING_EMBEDDER)
    # one embedding call a batch of rows: die in the second batch, after the first was written
    proc = subprocess.run([sys.executable, str(script), str(path), "1"], env={**os.environ}, timeout=300)
    assert proc.returncode == -signal.SIGKILL
    with ReplayBuffer.open(path, index={"kind": "exact"}) as buffer:
        assert buffer.embedder.dim == 256 and len(buffer.index) == n
        sizes = {len(r.embedding) for batch in buffer.store.rows_after(0) for r in batch}
        assert sizes == {256}
        assert buffer.retrieve(tr(7).state, tr(7).action, 1)[0].action == "click[a 7]"


def test_rows_left_in_two_sizes_are_reembedded_on_open(tmp_path):
    """A file an older version left half re-embedded: the rows of the wrong size get the stored embedder's."""
    path = tmp_path / "b.sqlite"
    with ReplayBuffer.open(path, index={"kind": "exact"}) as buffer:
        buffer.add_many([tr(i) for i in range(40)])
        other = HashingEmbedder(dim=128)
        buffer.store.replace_embeddings(
            (i, v) for i, v in zip(range(1, 21), other.embed([f"x{i}" for i in range(20)]), strict=True)
        )
    with ReplayBuffer.open(path, index={"kind": "exact"}) as buffer:
        assert len(buffer.index) == 40
        assert {len(r.embedding) for batch in buffer.store.rows_after(0) for r in batch} == {256}
        assert buffer.retrieve(tr(3).state, tr(3).action, 1)[0].action == "click[a 3]"


def test_another_process_writing_other_sized_vectors_is_a_clear_error(tmp_path):
    path = tmp_path / "b.sqlite"
    with ReplayBuffer.open(path) as a:
        a.add_many([tr(i) for i in range(5)])
        with ReplayBuffer.open(path, embedder={"dim": 64}) as b:  # re-embeds the file under a's feet
            b.add_many([tr(i) for i in range(5, 10)])
        with pytest.raises(StoreError, match="64-d embedding.*256-d"):
            a.retrieve("x", "y", 1)


KILLED_IN_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    from dreamgym_env.buffer import BufferConfig, IndexConfig, ReplayBuffer
    from dreamgym_env.buffer.index import IVFIndex
    from dreamgym_env.records import Transition

    def dying_save(self, path):
        with open(path, "wb") as f:
            f.write(b"half an index" * 1000)
        os.kill(os.getpid(), signal.SIGKILL)

    IVFIndex.save = dying_save
    config = BufferConfig(path=sys.argv[1], index=IndexConfig(kind="ivf", min_train=200))
    buffer = ReplayBuffer(config)
    buffer.add_many([
        Transition(domain="webshop", task_id="t", task="x", episode_id=f"e{i}", step=0,
                   state=f"state {i}", action=f"act {i}", next_state="n", source="offline")
        for i in range(400)
    ])
    buffer.save_index()
    """
)


def test_temporary_files_of_a_killed_save_are_removed_on_open(tmp_path):
    path = tmp_path / "b.sqlite"
    script = tmp_path / "killed.py"
    script.write_text(KILLED_IN_SAVE)
    proc = subprocess.run([sys.executable, str(script), str(path)], env={**os.environ}, timeout=300)
    assert proc.returncode == -signal.SIGKILL
    folder = tmp_path / "b.sqlite.index"
    assert [p.suffix for p in folder.iterdir()] == [".tmp"]
    live = folder / f".live.{os.getpid()}.x.tmp"  # a save in progress in a live process is left alone
    live.write_bytes(b"being written")
    with ReplayBuffer(_ivf(path)) as buffer:
        assert len(buffer) == len(buffer.index) == 400
        assert sorted(p.name for p in folder.iterdir()) == [live.name]
    assert live.exists() and len(list(folder.glob("*.faiss"))) == 1
    assert not [p for p in folder.iterdir() if p.suffix == ".tmp" and p != live]


# -- retraining off the caller's thread ------------------------------------------------------------


def _data(n, dim=32, seed=0):
    rng = np.random.default_rng(seed)
    return np.arange(1, n + 1, dtype=np.int64), l2_normalize(rng.normal(size=(n, dim)))


def test_ivf_retrains_in_the_background_and_keeps_serving_the_old_index():
    ids, vectors = _data(3000)
    gate, called = threading.Event(), threading.Event()
    calls = []

    def load_shard(domain, max_id):
        calls.append((threading.current_thread() is threading.main_thread(), max_id))
        called.set()
        assert gate.wait(30)
        keep = ids <= max_id
        return ids[keep], vectors[keep]

    index = ShardedIndex(32, IndexConfig(kind="ivf", min_train=200, retrain_growth=2.0), load_shard)
    index.add("a", ids[:300], vectors[:300])
    assert index.shards["a"].kind == "ivf" and index.shards["a"].trained_size == 300
    index.add("a", ids[300:700], vectors[300:700])  # past 2x its training size: retrain starts
    assert called.wait(30)  # the thread has started reading the shard (when is the scheduler's choice)
    assert calls == [(False, 700)]  # on another thread, over exactly the rows indexed so far
    old = index.shards["a"]
    index.add("a", ids[700:800], vectors[700:800])  # the retrain is still waiting: served by the old one
    index.remove("a", np.array([5, 750]))
    assert index.shards["a"] is old and index.search(vectors[759], 1, "a")[0][0] == 760
    assert index.retraining() == ["a"]
    gate.set()
    index.wait_for_retrain(timeout=30)
    new = index.shards["a"]
    assert new is not old and new.trained_size == 700 and len(new) == 798
    assert index.retraining() == []
    found, _ = index.search(vectors[0], 800, "a")
    assert sorted(found.tolist()) == [i for i in range(1, 801) if i not in (5, 750)]
    assert index.search(vectors[789], 1, "a")[0][0] == 790


def test_buffer_waits_for_a_background_retrain_and_searches_meanwhile(tmp_path):
    config = BufferConfig(index=IndexConfig(kind="ivf", min_train=200, nprobe=64, retrain_growth=2.0))
    with ReplayBuffer(config) as buffer:
        buffer.add_many([tr(i) for i in range(300)])
        buffer.add_many([tr(i) for i in range(300, 700)])
        assert buffer.retrieve(tr(650).state, tr(650).action, 1)[0].action == "click[a 650]"
        buffer.wait_for_index(timeout=60)
        assert buffer.index.shards["webshop"].trained_size == 700
        assert buffer.retrieve(tr(690).state, tr(690).action, 1)[0].action == "click[a 690]"


def test_retraining_inline_when_background_is_off():
    ids, vectors = _data(1000)
    calls = []

    def load_shard(domain, max_id):
        calls.append(threading.current_thread() is threading.main_thread())
        keep = ids <= max_id
        return ids[keep], vectors[keep]

    config = IndexConfig(kind="ivf", min_train=200, retrain_growth=2.0, background_retrain=False)
    index = ShardedIndex(32, config, load_shard)
    index.add("a", ids[:300], vectors[:300])
    index.add("a", ids[300:700], vectors[300:700])
    assert calls == [True] and index.shards["a"].trained_size == 700
