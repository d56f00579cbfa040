"""In-memory cosine top-k search over the stored retrieval keys, one shard per domain.

Vectors are unit-norm float32, so cosine similarity is an inner product. Each domain gets its own
shard, which makes the domain filter (the env always sets it) free. A shard starts exact (numpy brute
force, the best choice for small buffers) and, past a size threshold, becomes a faiss approximate index:
IVF (trained on the shard, retrained as the shard outgrows its cells; vectors held as float32, float16 or
8-bit codes) or HNSW. faiss is imported
only when an approximate shard is built.

Approximate shards can be written to files whose names carry the highest row id and eviction sequence
they cover (the watermark); a reopened buffer loads them and adds only what was committed since.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dreamgym_env.buffer.config import IndexConfig
from dreamgym_env.errors import DependencyNotInstalled

__all__ = ["ExactIndex", "HNSWIndex", "IVFIndex", "ShardedIndex", "VectorIndex", "import_faiss"]


def import_faiss() -> Any:
    """Import faiss, or raise :class:`DependencyNotInstalled` naming the ``buffer`` extra."""
    try:
        import faiss
    except ImportError as e:
        raise DependencyNotInstalled("faiss-cpu", "buffer", "Approximate replay-buffer search") from e
    return faiss


_SMALL_BATCH = (
    256  # below this many vectors, an add is a query-sized job: thread pools cost more than they give
)


@functools.cache
def _blas_controller() -> Any:
    """Threadpoolctl's controller (scanning loaded libraries is slow, so once); ``None`` without it."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


@contextlib.contextmanager
def query_threads(n: int, *, faiss: Any = None) -> Iterator[None]:
    """Run one query with at most ``n`` BLAS threads (and faiss OpenMP threads when ``faiss`` is given)."""
    previous = None
    if faiss is not None:
        previous = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(n)
    controller = _blas_controller() if faiss is None else None
    try:
        if controller is not None:
            with controller.limit(limits=n, user_api="blas"):
                yield
        else:
            yield
    finally:
        if previous is not None:
            faiss.omp_set_num_threads(previous)


class VectorIndex(Protocol):
    """A set of (id, unit vector) pairs searchable by inner product."""

    kind: str

    def __len__(self) -> int:
        """Number of live vectors."""
        ...

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors under the given int64 ids (ids must be new)."""
        ...

    def remove(self, ids: np.ndarray) -> None:
        """Remove ids (unknown ids are ignored)."""
        ...

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Return up to ``k`` (ids, scores), best first."""
        ...


class ExactIndex:
    """Brute-force inner product over a growable numpy matrix (exact; fast for small shards)."""

    kind = "exact"

    def __init__(self, dim: int, threads: int = 1) -> None:
        self.dim = dim
        self.threads = threads
        self._vectors = np.zeros((64, dim), dtype=np.float32)
        self._ids = np.zeros(64, dtype=np.int64)
        self._pos: dict[int, int] = {}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Append vectors, doubling capacity as needed."""
        m = len(ids)
        if self._n + m > len(self._ids):
            capacity = max(2 * len(self._ids), self._n + m)
            grown = np.zeros((capacity, self.dim), dtype=np.float32)
            grown[: self._n] = self._vectors[: self._n]
            self._vectors = grown
            self._ids = np.resize(self._ids, capacity)
        self._vectors[self._n : self._n + m] = vectors
        self._ids[self._n : self._n + m] = ids
        for offset, i in enumerate(ids.tolist()):
            self._pos[i] = self._n + offset
        self._n += m

    def remove(self, ids: np.ndarray) -> None:
        """Remove by swapping the last row into the hole (O(1) per id)."""
        for i in ids.tolist():
            pos = self._pos.pop(i, None)
            if pos is None:
                continue
            last = self._n - 1
            if pos != last:
                moved = int(self._ids[last])
                self._vectors[pos] = self._vectors[last]
                self._ids[pos] = moved
                self._pos[moved] = pos
            self._n = last

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-k by inner product."""
        if self._n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        with query_threads(self.threads):
            scores = self._vectors[: self._n] @ query
        k = min(k, self._n)
        top = np.argpartition(scores, self._n - k)[self._n - k :] if k < self._n else np.arange(self._n)
        top = top[np.argsort(-scores[top], kind="stable")]
        return self._ids[top].copy(), scores[top]

    def contents(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of every live row (views; copy before mutating the index)."""
        return self._ids[: self._n], self._vectors[: self._n]


class IVFIndex:
    """faiss IVF with inner product: k-means cells, ``nprobe`` of them scanned per query.

    A query's time is spent scanning the vectors of its cells, so how they are stored
    (``config.ivf_codes``) sets the speed: half-precision codes halve the bytes read against float32
    and leave the ranking as it was, since unit vectors' inner products need no more than fp16 holds.

    Args:
        dim: Vector dimension.
        config: Index settings (``nlist``, ``nprobe``, ``ivf_codes``).
        train_vectors: Vectors to train the cells on (a sample of the shard).
    """

    kind = "ivf"

    def __init__(self, dim: int, config: IndexConfig, train_vectors: np.ndarray | None = None) -> None:
        self._faiss = import_faiss()
        self._query_threads = config.query_threads
        self.dim = dim
        self._nprobe = config.nprobe
        self._codes = config.ivf_codes
        self._index: Any = None
        self.trained_size = 0
        if train_vectors is not None:
            self._train(train_vectors, config.nlist)

    @staticmethod
    def default_nlist(n: int) -> int:
        """Cells for ``n`` vectors: about ``4 * sqrt(n)``, with at least 39 training points per cell."""
        return int(max(1, min(65536, round(4 * math.sqrt(n)), n // 39)))

    def _train(self, vectors: np.ndarray, nlist: int | None) -> None:
        faiss = self._faiss
        n = len(vectors)
        nlist = min(nlist or self.default_nlist(n), max(1, n // 39))
        quantizer = faiss.IndexFlatIP(self.dim)
        if self._codes == "flat":
            index = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            codes = faiss.ScalarQuantizer.QT_fp16 if self._codes == "fp16" else faiss.ScalarQuantizer.QT_8bit
            index = faiss.IndexIVFScalarQuantizer(
                quantizer, self.dim, nlist, codes, faiss.METRIC_INNER_PRODUCT
            )
        # Ten k-means rounds on at most 64 points a cell: cells good enough for search, trained in seconds
        # even at a million vectors on two cores.
        index.cp.niter = 10
        index.cp.max_points_per_centroid = 64
        index.cp.seed = 1234
        index.train(np.ascontiguousarray(vectors, dtype=np.float32))
        index.nprobe = min(self._nprobe, nlist)
        self._quantizer = quantizer  # the IVF index does not own it
        self._index = index
        self.trained_size = n

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors to their nearest cells (a few at a time, as the env adds them, on one thread)."""
        threads = self._query_threads if len(ids) < _SMALL_BATCH else self._faiss.omp_get_max_threads()
        with query_threads(threads, faiss=self._faiss):
            self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids.astype(np.int64))

    def remove(self, ids: np.ndarray) -> None:
        """Remove ids from their cells."""
        if len(ids):
            self._index.remove_ids(self._faiss.IDSelectorBatch(ids.astype(np.int64)))

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-k."""
        if len(self) == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        with query_threads(self._query_threads, faiss=self._faiss):
            scores, ids = self._index.search(query.reshape(1, -1).astype(np.float32, copy=False), k)
        keep = ids[0] >= 0
        return ids[0][keep], scores[0][keep]

    def save(self, path: str) -> None:
        """Write the index to ``path``."""
        self._faiss.write_index(self._index, path)

    def _codes_of(self, index: Any) -> str:
        if not isinstance(index, self._faiss.IndexIVFScalarQuantizer):
            return "flat"
        return "fp16" if index.sq.qtype == self._faiss.ScalarQuantizer.QT_fp16 else "sq8"

    @property
    def codes(self) -> str:
        """How the cells store vectors: ``flat``, ``fp16`` or ``sq8``."""
        return self._codes_of(self._index)

    @classmethod
    def load(cls, path: str, dim: int, config: IndexConfig) -> IVFIndex:
        """Read an index written by :meth:`save`."""
        self = cls(dim, config)
        index = self._faiss.read_index(path)
        if index.d != dim:
            raise ValueError(f"{path} holds {index.d}-d vectors, expected {dim}")
        if self._codes_of(index) != config.ivf_codes:
            raise ValueError(
                f"{path} holds {self._codes_of(index)} codes, the config asks for {config.ivf_codes}"
            )
        index.nprobe = min(config.nprobe, index.nlist)
        self._index = index
        self.trained_size = int(index.ntotal)
        return self


class HNSWIndex:
    """faiss HNSW graph with inner product; removals are tombstones filtered out of the results.

    HNSW needs no training and grows one vector at a time, but cannot delete: evicted ids are
    remembered and the query asks for enough extra neighbours to make up for them.
    """

    kind = "hnsw"

    def __init__(self, dim: int, config: IndexConfig) -> None:
        faiss = import_faiss()
        self._faiss = faiss
        self._query_threads = config.query_threads
        self.dim = dim
        graph = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = config.ef_construction
        graph.hnsw.efSearch = config.ef_search
        self._graph = graph
        self._index = faiss.IndexIDMap2(graph)
        self._dead: set[int] = set()
        self.trained_size = 0

    def __len__(self) -> int:
        return int(self._index.ntotal) - len(self._dead)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Insert vectors into the graph (small batches on one thread, like queries)."""
        threads = self._query_threads if len(ids) < _SMALL_BATCH else self._faiss.omp_get_max_threads()
        with query_threads(threads, faiss=self._faiss):
            self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids.astype(np.int64))

    def remove(self, ids: np.ndarray) -> None:
        """Tombstone ids."""
        self._dead.update(ids.tolist())

    def all_ids(self) -> np.ndarray:
        """Every id in the graph, tombstoned or not."""
        return self._faiss.vector_to_array(self._index.id_map).astype(np.int64)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-k, skipping tombstones."""
        if len(self) == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        fetch = min(int(self._index.ntotal), k + len(self._dead))
        with query_threads(self._query_threads, faiss=self._faiss):
            scores, ids = self._index.search(query.reshape(1, -1).astype(np.float32, copy=False), fetch)
        keep = [j for j, i in enumerate(ids[0].tolist()) if i >= 0 and i not in self._dead][:k]
        return ids[0][keep], scores[0][keep]

    def save(self, path: str) -> None:
        """Write the graph to ``path`` (tombstones are rebuilt from the store on load)."""
        self._faiss.write_index(self._index, path)

    @classmethod
    def load(cls, path: str, dim: int, config: IndexConfig) -> HNSWIndex:
        """Read a graph written by :meth:`save`."""
        self = cls(dim, config)
        index = self._faiss.read_index(path)
        if index.d != dim:
            raise ValueError(f"{path} holds {index.d}-d vectors, expected {dim}")
        self._faiss.downcast_index(index.index).hnsw.efSearch = config.ef_search
        self._index = index
        self.trained_size = int(index.ntotal)
        return self


_SNAPSHOT = re.compile(r"^(?P<domain>[0-9a-f]*)\.(?P<kind>ivf|hnsw)\.w(?P<wm>\d+)\.e(?P<ev>\d+)\.faiss$")

LoadShard = Callable[[str], tuple[np.ndarray, np.ndarray]]
"""Returns (ids, vectors) of every stored row of a domain: how a shard is rebuilt or retrained."""


class ShardedIndex:
    """One index per domain, switching from exact to approximate search as a domain grows.

    Args:
        dim: Vector dimension.
        config: Index settings.
        load_shard: Reads a domain's (ids, vectors) back from the store, for retraining.
    """

    def __init__(self, dim: int, config: IndexConfig, load_shard: LoadShard) -> None:
        self.dim = dim
        self.config = config
        self._load_shard = load_shard
        self.shards: dict[str, VectorIndex] = {}
        if config.threads is not None and config.kind != "exact":
            import_faiss().omp_set_num_threads(config.threads)

    def __len__(self) -> int:
        return sum(len(s) for s in self.shards.values())

    def _wanted_kind(self, n: int) -> str:
        kind = self.config.kind
        if kind == "auto":
            return self.config.approximate if n > self.config.threshold else "exact"
        if kind in ("ivf", "hnsw") and n < self.config.min_train:
            return "exact"
        return kind

    def add(self, domain: str, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors to a domain's shard, upgrading or retraining the shard when it has outgrown itself."""
        shard = self.shards.get(domain)
        if shard is None:
            shard = self.shards[domain] = ExactIndex(self.dim, self.config.query_threads)
        shard.add(ids, vectors)
        n = len(shard)
        wanted = self._wanted_kind(n)
        if wanted != shard.kind:
            self.shards[domain] = self._build(wanted, *self._contents(domain, shard))
        elif isinstance(shard, IVFIndex) and n > shard.trained_size * self.config.retrain_growth:
            self.shards[domain] = self._build("ivf", *self._load_shard(domain))

    def _contents(self, domain: str, shard: VectorIndex) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(shard, ExactIndex):
            ids, vectors = shard.contents()
            return ids.copy(), vectors.copy()
        return self._load_shard(domain)

    def _build(self, kind: str, ids: np.ndarray, vectors: np.ndarray) -> VectorIndex:
        index: VectorIndex
        if kind == "exact":
            index = ExactIndex(self.dim, self.config.query_threads)
        elif kind == "ivf":
            index = IVFIndex(self.dim, self.config, train_vectors=vectors)
        else:
            index = HNSWIndex(self.dim, self.config)
            index.trained_size = len(ids)
        index.add(ids, vectors)
        return index

    def remove(self, domain: str, ids: np.ndarray) -> None:
        """Remove ids from a domain's shard."""
        shard = self.shards.get(domain)
        if shard is not None:
            shard.remove(ids)

    def search(self, query: np.ndarray, k: int, domain: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (ids, scores) in one domain, or merged across all domains."""
        if domain is not None:
            shard = self.shards.get(domain)
            if shard is None:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            return shard.search(query, k)
        parts = [s.search(query, k) for s in self.shards.values()]
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        ids = np.concatenate([p[0] for p in parts])
        scores = np.concatenate([p[1] for p in parts])
        order = np.argsort(-scores, kind="stable")[:k]
        return ids[order], scores[order]

    # -- persistence --------------------------------------------------------------------------------

    @staticmethod
    def snapshot_dir(db_path: str) -> Path:
        """Where the approximate shards of the buffer at ``db_path`` are saved."""
        return Path(f"{db_path}.index")

    def save(self, directory: Path, watermark: int, eviction_seq: int) -> None:
        """Write every approximate shard atomically; exact shards are rebuilt from the store instead."""
        directory.mkdir(parents=True, exist_ok=True)
        for domain, shard in self.shards.items():
            if not isinstance(shard, IVFIndex | HNSWIndex):
                continue
            stem = domain.encode().hex()
            name = f"{stem}.{shard.kind}.w{watermark}.e{eviction_seq}.faiss"
            fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
            os.close(fd)
            try:
                shard.save(tmp)
                os.replace(tmp, directory / name)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            for old in directory.iterdir():
                match = _SNAPSHOT.match(old.name)
                if match and match["domain"] == stem and old.name != name:
                    old.unlink(missing_ok=True)

    def load(self, directory: Path) -> dict[str, tuple[int, int]]:
        """Load the newest snapshot of each domain whose kind is still wanted.

        Returns:
            domain -> (watermark, eviction sequence) of each loaded shard.
        """
        loaded: dict[str, tuple[int, int]] = {}
        if not directory.is_dir():
            return loaded
        best: dict[str, tuple[int, int, str, Path]] = {}
        for path in directory.iterdir():
            match = _SNAPSHOT.match(path.name)
            if not match:
                continue
            domain = bytes.fromhex(match["domain"]).decode()
            key = (int(match["wm"]), int(match["ev"]), match["kind"], path)
            if domain not in best or key[:2] > best[domain][:2]:
                best[domain] = key
        for domain, (wm, ev, kind, path) in best.items():
            if self.config.kind not in ("auto", kind) or (
                self.config.kind == "auto" and self.config.approximate != kind
            ):
                continue
            try:
                shard: VectorIndex
                shard = (IVFIndex if kind == "ivf" else HNSWIndex).load(str(path), self.dim, self.config)
            except (RuntimeError, ValueError):
                continue  # unreadable or stale snapshot: the shard is rebuilt from the store
            self.shards[domain] = shard
            loaded[domain] = (wm, ev)
        return loaded
