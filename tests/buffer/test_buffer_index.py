import numpy as np
import pytest

from dreamgym_env.buffer import IndexConfig
from dreamgym_env.buffer.embedders import l2_normalize
from dreamgym_env.buffer.index import ExactIndex, IVFIndex, ShardedIndex

faiss = pytest.importorskip("faiss")


def _data(n, dim=32, seed=0):
    rng = np.random.default_rng(seed)
    return np.arange(1, n + 1, dtype=np.int64), l2_normalize(rng.normal(size=(n, dim)))


def test_exact_top_k_and_remove():
    ids, vectors = _data(100)
    index = ExactIndex(32)
    index.add(ids[:60], vectors[:60])
    index.add(ids[60:], vectors[60:])
    found, scores = index.search(vectors[41], 3)
    assert found[0] == 42 and scores[0] == pytest.approx(1.0, abs=1e-5)
    assert list(scores) == sorted(scores, reverse=True)
    index.remove(np.array([42, 100, 12345]))
    assert len(index) == 98
    assert 42 not in index.search(vectors[41], 98)[0]
    np.testing.assert_array_equal(index.search(vectors[98], 1)[0], [99])


@pytest.mark.parametrize("codes", ["flat", "fp16", "sq8"])
def test_ivf_matches_exact_on_clustered_data(codes):
    ids, vectors = _data(5000, seed=1)
    ivf = IVFIndex(32, IndexConfig(nprobe=64, ivf_codes=codes), train_vectors=vectors)
    ivf.add(ids, vectors)
    assert ivf.codes == codes
    hits = sum(ivf.search(vectors[i], 1)[0][0] == ids[i] for i in range(0, 5000, 50))
    assert hits == 100
    exact = ExactIndex(32)
    exact.add(ids, vectors)
    tolerance = {"flat": 1e-5, "fp16": 2e-3, "sq8": 5e-2}[codes]
    for i in range(0, 5000, 500):
        found, scores = ivf.search(vectors[i], 5)
        truth = dict(zip(*exact.search(vectors[i], 5000), strict=True))
        np.testing.assert_allclose(scores, [truth[j] for j in found], atol=tolerance)
    ivf.remove(np.array([1]))
    assert 1 not in ivf.search(vectors[0], 5)[0]


def test_ivf_snapshot_with_other_codes_is_not_loaded(tmp_path):
    ids, vectors = _data(2000, seed=4)
    ivf = IVFIndex(32, IndexConfig(ivf_codes="flat"), train_vectors=vectors)
    ivf.add(ids, vectors)
    ivf.save(str(tmp_path / "a.faiss"))
    assert IVFIndex.load(str(tmp_path / "a.faiss"), 32, IndexConfig(ivf_codes="flat")).codes == "flat"
    with pytest.raises(ValueError, match="codes"):
        IVFIndex.load(str(tmp_path / "a.faiss"), 32, IndexConfig(ivf_codes="fp16"))


def test_sharded_index_switches_to_approximate_past_threshold_and_filters_domain():
    ids, vectors = _data(3000, seed=2)
    config = IndexConfig(kind="auto", threshold=1000)
    index = ShardedIndex(32, config, load_shard=lambda d, m: (ids[:2000], vectors[:2000]))
    index.add("a", ids[:500], vectors[:500])
    assert index.shards["a"].kind == "exact"
    index.add("a", ids[500:2000], vectors[500:2000])
    assert index.shards["a"].kind == "ivf"
    index.add("b", ids[2000:], vectors[2000:])
    assert index.search(vectors[2500], 1, domain="a")[0][0] != 2501
    assert index.search(vectors[2500], 1, domain="b")[0][0] == 2501
    assert index.search(vectors[10], 1)[0][0] == 11


def test_hnsw_tombstones(tmp_path):
    ids, vectors = _data(2000, seed=3)
    index = ShardedIndex(32, IndexConfig(kind="hnsw", min_train=100), load_shard=lambda d, m: (ids, vectors))
    index.add("a", ids, vectors)
    assert index.shards["a"].kind == "hnsw"
    index.remove("a", np.array([7]))
    assert 7 not in index.search(vectors[6], 5, domain="a")[0]
    index.save(tmp_path, watermark=2000, eviction_seq=1, token="ab12")
    again = ShardedIndex(32, IndexConfig(kind="hnsw", min_train=100), load_shard=lambda d, m: (ids, vectors))
    assert again.load(tmp_path, "ffff", 2000, 1) == {}  # another save's token: not this database's
    assert again.load(tmp_path, "ab12", 1999, 1) == {}  # past the database's highest id
    assert again.load(tmp_path, "ab12", 2000, 1) == {"a": (2000, 1)}
    assert again.search(vectors[99], 1, domain="a")[0][0] == 100
