import json

import numpy as np
import pytest

from dreamgym_env.buffer import BufferConfig, IndexConfig, ReplayBuffer
from dreamgym_env.cli import main
from dreamgym_env.records import Transition
from dreamgym_env.retrieval import Retriever


def tr(i, source="sim", episode=None, domain="webshop", **kw):
    return Transition(
        domain=domain,
        task_id="t",
        task="buy shoes",
        episode_id=episode or f"ep{i // 5}",
        step=i % 5,
        state=f"[search results] page 1 results: item {i} shoes size {i % 13}",
        action=f"click[item {i}]",
        next_state=f"[item page] item {i}",
        source=source,
        **kw,
    )


def test_is_a_retriever_and_returns_itself_first(store_location):
    with ReplayBuffer.open(store_location) as buffer:
        assert isinstance(buffer, Retriever)
        buffer.add_many([tr(i) for i in range(50)])
        hits = buffer.search(tr(17).state, tr(17).action, k=3)
        assert hits[0].transition.action == "click[item 17]" and hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert len(buffer.retrieve(tr(17).state, tr(17).action)) == buffer.config.k == 4


def test_domain_and_episode_filters(store_location):
    with ReplayBuffer.open(store_location) as buffer:
        buffer.add_many([tr(i) for i in range(20)] + [tr(i, domain="alfworld") for i in range(20)])
        assert {t.domain for t in buffer.retrieve(tr(3).state, tr(3).action, 10, domain="alfworld")} == {
            "alfworld"
        }
        hits = buffer.retrieve(tr(3).state, tr(3).action, 30, domain="webshop", exclude_episode="ep0")
        assert len(hits) == 15 and all(t.episode_id != "ep0" for t in hits)
        assert buffer.retrieve("x", "y", 3, domain="nope") == []


def test_dedup_and_store_policy():
    with ReplayBuffer(store_policy="real") as buffer:
        buffer.add(tr(1, source="sim"))
        buffer.add(tr(2, source="real"))
        assert len(buffer) == 1
        result = buffer.add_many([tr(1, source="sim"), tr(2, source="real"), tr(2, source="sim")])
        assert (result.stored, result.duplicates) == (2, 1)  # the sim copy of a real one is kept apart
    with ReplayBuffer(store_policy="none") as buffer:
        buffer.add(tr(1, source="real"))
        assert len(buffer) == 0
    with ReplayBuffer(dedup="episode") as buffer:
        buffer.add_many([tr(1), tr(1, episode="other"), tr(1)])
        assert len(buffer) == 2


def test_max_synthetic_evicts_oldest_sim_only(store_location):
    with ReplayBuffer.open(store_location, max_synthetic=10) as buffer:
        buffer.add_many([tr(i, source="offline") for i in range(5)])
        for i in range(100, 130):
            buffer.add(tr(i, source="sim"))
        buffer.add(tr(200, source="real"))
        assert buffer.store.count(source="sim") == 10 and buffer.store.count(source="offline") == 5
        assert len(buffer) == 16
        kept = sorted(int(t.action.split()[1][:-1]) for t in buffer.iter_transitions(source="sim"))
        assert kept == list(range(120, 130))
        hits = buffer.retrieve(tr(101).state, tr(101).action, 16)
        assert len(hits) == 16 and "click[item 101]" not in [t.action for t in hits]


def test_reopen_restores_everything_and_the_ivf_snapshot(tmp_path):
    path = str(tmp_path / "b.sqlite")
    config = BufferConfig(path=path, index=IndexConfig(kind="ivf", min_train=200, nprobe=64))
    with ReplayBuffer(config) as buffer:
        buffer.add_many([tr(i) for i in range(600)])
        assert buffer.index.shards["webshop"].kind == "ivf"
    snapshots = list((tmp_path / "b.sqlite.index").glob("*.faiss"))
    assert len(snapshots) == 1 and ".w600." in snapshots[0].name
    with ReplayBuffer(config) as buffer:
        assert len(buffer.index) == 600 and buffer.index.shards["webshop"].trained_size == 600
        buffer.add_many([tr(i) for i in range(600, 650)])
        assert buffer.retrieve(tr(640).state, tr(640).action, 1)[0].action == "click[item 640]"
    with ReplayBuffer(config) as buffer:
        assert len(buffer) == len(buffer.index) == 650


def test_changing_the_embedder_reembeds(store_location):
    path = store_location
    with ReplayBuffer.open(path) as buffer:
        buffer.add_many([tr(i) for i in range(30)])
    with ReplayBuffer.open(path, embedder={"dim": 64}) as buffer:
        assert buffer.embedder.dim == 64 and len(buffer.index) == 30
        assert buffer.retrieve(tr(7).state, tr(7).action, 1)[0].action == "click[item 7]"


def test_two_handles_see_each_others_writes(store_location):
    path = store_location
    with ReplayBuffer.open(path) as a, ReplayBuffer.open(path, max_synthetic=5) as b:
        a.add_many([tr(i) for i in range(3)])
        assert b.retrieve(tr(2).state, tr(2).action, 1)[0].action == "click[item 2]"
        b.add_many([tr(i) for i in range(3, 10)])  # evicts 0..4
        assert len(a.retrieve("x", "y", 10)) == 5 and len(a.index) == 5


def test_cli_import_stats_search_export(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(tr(i).model_dump_json() + "\n" for i in range(12)) + "garbage\n")
    db = str(tmp_path / "b.sqlite")

    def run(*argv):
        return main(["buffer", *argv])

    assert run("import", db, str(src), "--quiet") == 0
    out = capsys.readouterr()
    assert "10 stored" in out.out and "in.jsonl:13" in out.err  # the bad line drops episode ep2
    assert run("stats", db, "--json") == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["transitions"] == 10
    assert run("search", db, "--state", tr(4).state, "--action", tr(4).action, "-k", "2", "--json") == 0
    assert json.loads(capsys.readouterr().out)[0]["action"] == "click[item 4]"
    assert run("export", db, str(tmp_path / "out.jsonl")) == 0
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 10
    # Strict mode names the bad record's file and line, and writes nothing, not even the good records.
    strict_db = str(tmp_path / "strict.sqlite")
    assert run("import", strict_db, str(src), "--strict", "--quiet") == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{src}:13: not valid JSON" in err, err
    assert run("stats", strict_db, "--json") == 0
    assert json.loads(capsys.readouterr().out)["transitions"] == 0


def test_embeddings_are_stored_normalised(store_location):
    with ReplayBuffer.open(store_location) as buffer:
        buffer.add_many([tr(i) for i in range(5)])
        vectors = np.stack([r.embedding for batch in buffer.store.rows_after(0) for r in batch])
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


class CountingEmbedder:
    """Wraps the default embedder and counts the texts it embeds."""

    def __init__(self):
        from dreamgym_env.buffer import HashingEmbedder

        self.inner = HashingEmbedder(dim=64)
        self.dim, self.signature, self.texts = 64, self.inner.signature, 0

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_a_step_embeds_its_key_once():
    """An env queries with (state, action), then stores the transition under the same key."""
    embedder = CountingEmbedder()
    with ReplayBuffer(embedder=embedder) as buffer:
        buffer.add_many([tr(i) for i in range(10)])
        before = embedder.texts
        buffer.retrieve(tr(42).state, tr(42).action, 2)
        buffer.add(tr(42))
        assert embedder.texts - before == 2  # one (state, action) pair, embedded by the query only
        assert buffer.search(tr(42).state, tr(42).action, 1)[0].score == pytest.approx(1.0, abs=1e-5)


def test_interleaved_writes_of_two_handles_index_every_row_once(store_location):
    """Own writes go straight into the index; another handle's commits are read back, never twice."""
    path = store_location
    with ReplayBuffer.open(path) as a, ReplayBuffer.open(path) as b:
        for i in range(40):
            (a if i % 3 else b).add(tr(i))
            if i % 7 == 0:
                a.retrieve(tr(i).state, tr(i).action, 1)
        a.retrieve("x", "y", 1)
        b.retrieve("x", "y", 1)
        for buffer in (a, b):
            ids, _ = buffer.index.search(np.ones(buffer.embedder.dim, dtype=np.float32), 100, "webshop")
            assert sorted(ids.tolist()) == list(range(1, 41))


def test_excluding_the_episode_keeps_score_order(store_location):
    with ReplayBuffer.open(store_location) as buffer:
        buffer.add_many([tr(i) for i in range(30)])
        hits = buffer.search(tr(7).state, tr(7).action, 6, exclude_episode="ep1")
        assert len(hits) == 6 and all(h.transition.episode_id != "ep1" for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
