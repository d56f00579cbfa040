"""In-memory cosine top-k search over the stored retrieval keys, one shard per domain.

Vectors are unit-norm float32, so cosine similarity is an inner product. Each domain gets its own
shard, which makes the domain filter (the env always sets it) free. A shard starts exact (numpy brute
force, the best choice for small buffers) and, past a size threshold, becomes a faiss approximate index:
IVF (trained on the shard, retrained as the shard outgrows its cells; vectors held as float32, float16 or
8-bit codes) or HNSW. faiss is imported
only when an approximate shard is built.

Approximate shards can be written to files whose names carry the save's token (also recorded in the
database) and the highest row id and eviction sequence they cover (the watermark); a reopened buffer
loads those of its database's last save and adds only what was committed since. IVF shards that outgrow
their cells are retrained, and HNSW shards whose tombstones outnumber their live vectors are rebuilt
without them, on a background thread while the old index keeps serving.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dreamgym_env.buffer.config import IndexConfig
from dreamgym_env.errors import DependencyNotInstalled


def _import_faiss() -> Any:
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
    trained_size: int
    """How many vectors the index was built or trained on (0 for exact search)."""

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
        self.trained_size = 0
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


def _read_faiss_index(faiss: Any, path: str, dim: int) -> Any:
    """The faiss index saved at ``path``, refused when its vectors are not ``dim``-dimensional."""
    index = faiss.read_index(path)
    if index.d != dim:
        raise ValueError(f"{path} holds {index.d}-d vectors, expected {dim}")
    return index


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
        self._faiss = _import_faiss()
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
        index = _read_faiss_index(self._faiss, path, dim)
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
    remembered and the query asks for enough extra neighbours to make up for them. That grows with the
    tombstones, so :class:`ShardedIndex` rebuilds the graph from the live vectors once they outnumber
    them (``config.hnsw_compact_ratio``).
    """

    kind = "hnsw"

    def __init__(self, dim: int, config: IndexConfig) -> None:
        faiss = _import_faiss()
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
        self.compact_floor = 0
        """Tombstones the shard must pass before a compaction is tried (raised when one fails)."""

    def __len__(self) -> int:
        return self.graph_size - len(self._dead)

    @property
    def graph_size(self) -> int:
        """Vectors in the graph, tombstones included: what it holds in memory and walks through."""
        return int(self._index.ntotal)

    @property
    def tombstones(self) -> int:
        """Evicted ids still in the graph, filtered out of every search until the graph is rebuilt."""
        return len(self._dead)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Insert vectors into the graph (small batches on one thread, like queries)."""
        threads = self._query_threads if len(ids) < _SMALL_BATCH else self._faiss.omp_get_max_threads()
        with query_threads(threads, faiss=self._faiss):
            self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids.astype(np.int64))

    def remove(self, ids: np.ndarray) -> None:
        """Tombstone the ids the graph holds; others are ignored, as the other indexes ignore them.

        A buffer also hears of evictions of rows it never indexed (another process added and evicted
        them between two catch-ups, or before a restored snapshot was built). Tombstoning those would
        undercount the shard, and past zero make ``len()`` raise.
        """
        for i in ids.tolist():
            if i not in self._dead and self._holds(i):
                self._dead.add(i)

    def _holds(self, i: int) -> bool:
        """Whether id ``i`` is in the graph (the id map's reverse lookup, which raises when it is not)."""
        try:
            self._index.reconstruct(i)
        except RuntimeError:
            return False
        return True

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
        index = _read_faiss_index(self._faiss, path, dim)
        self._faiss.downcast_index(index.index).hnsw.efSearch = config.ef_search
        self._index = index
        self.trained_size = int(index.ntotal)
        return self


_SNAPSHOT = re.compile(
    r"^(?P<domain>[0-9a-f]*)\.(?P<kind>ivf|hnsw)\.s(?P<token>[0-9a-f]+)\.w(?P<wm>\d+)\.e(?P<ev>\d+)\.faiss$"
)
_LEGACY_SNAPSHOT = re.compile(r"^[0-9a-f]*\.(ivf|hnsw)\.w\d+\.e\d+\.faiss$")  # named no database: unusable
_TEMP = re.compile(r"^\.(?P<domain>[0-9a-f]*)\.(?P<pid>\d+)\.[0-9a-f]+\.tmp$")
_LEGACY_TEMP = re.compile(r"^tmp\w+\.tmp$")
_LEGACY_TEMP_AGE_S = 600.0  # older temporaries name no writer: past this age no save can still be writing

_RETRAIN_NICE = 10
"""How much lower than its process a background retrain runs (``nice`` increment)."""

LoadShard = Callable[[str, int], tuple[np.ndarray, np.ndarray]]
"""Returns (ids, vectors) of a domain's stored rows with ``id <= max_id``: how a shard is rebuilt or
retrained over exactly the rows it holds."""

logger = logging.getLogger(__name__)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # somebody else's live process
        return True
    return True


@dataclass
class _Retrain:
    """A shard being rebuilt on another thread, and what happened to the old one meanwhile."""

    shard: VectorIndex
    max_id: int
    done: threading.Event = field(default_factory=threading.Event)
    journal: list[tuple[np.ndarray, np.ndarray | None]] = field(default_factory=list)
    result: VectorIndex | None = None
    error: BaseException | None = None


class ShardedIndex:
    """One index per domain, switching from exact to approximate search as a domain grows.

    An IVF shard that has outgrown its cells is retrained, and an HNSW shard whose tombstones outnumber
    its live vectors (``config.hnsw_compact_ratio`` times) is rebuilt from the live ones, on a
    background thread (``config.background_retrain``): the old shard keeps serving and taking adds and
    removals, which are also journaled; the next call after the rebuild ends replays the journal into
    the new shard and swaps it in. Calls are not thread-safe among themselves (the buffer serialises
    them); only the rebuild runs beside them.

    Args:
        dim: Vector dimension.
        config: Index settings.
        load_shard: Reads a domain's (ids, vectors) up to an id back from the store, for rebuilding.
    """

    def __init__(self, dim: int, config: IndexConfig, load_shard: LoadShard) -> None:
        self.dim = dim
        self.config = config
        self._load_shard = load_shard
        self.shards: dict[str, VectorIndex] = {}
        self._max_id: dict[str, int] = {}
        self._retrains: dict[str, _Retrain] = {}
        if config.threads is not None and config.kind != "exact":
            _import_faiss().omp_set_num_threads(config.threads)

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
        if len(ids) == 0:
            return
        self.install_retrained()
        shard = self.shards.get(domain)
        if shard is None:
            shard = self.shards[domain] = ExactIndex(self.dim, self.config.query_threads)
        shard.add(ids, vectors)
        self._max_id[domain] = max(self._max_id.get(domain, 0), int(ids.max()))
        job = self._retrains.get(domain)
        if job is not None:
            job.journal.append((ids.copy(), np.array(vectors, dtype=np.float32)))
        n = len(shard)
        wanted = self._wanted_kind(n)
        if wanted != shard.kind:
            self._retrains.pop(domain, None)  # a retrain of the shard being replaced is moot
            self.shards[domain] = self._build(wanted, *self._contents(domain, shard))
        elif (
            isinstance(shard, IVFIndex)
            and job is None
            and n > shard.trained_size * self.config.retrain_growth
        ):
            self._rebuild(domain, shard)

    def _contents(self, domain: str, shard: VectorIndex) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(shard, ExactIndex):
            ids, vectors = shard.contents()
            return ids.copy(), vectors.copy()
        return self._load_shard(domain, self._max_id[domain])

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

    # -- retraining -------------------------------------------------------------------------------

    def _compaction_due(self, shard: HNSWIndex) -> bool:
        """Whether an HNSW shard's tombstones outnumber its live vectors ``hnsw_compact_ratio`` times."""
        ratio = self.config.hnsw_compact_ratio
        return ratio is not None and shard.tombstones > max(ratio * len(shard), shard.compact_floor)

    def _rebuild(self, domain: str, shard: IVFIndex | HNSWIndex) -> None:
        """Rebuild a shard over the rows it holds now (``id <= max id``), here or on a thread.

        The store has already dropped the evicted rows, so IVF gets new cells trained on its grown
        shard and HNSW a graph of its live vectors only.
        """
        kind, max_id = shard.kind, self._max_id[domain]
        if not self.config.background_retrain:
            self.shards[domain] = self._build(kind, *self._load_shard(domain, max_id))
            return
        job = self._retrains[domain] = _Retrain(shard, max_id)

        def train() -> None:
            try:
                # Lower this thread's priority (Linux: per thread, inherited by faiss's OpenMP workers),
                # so the steps the old shard still serves win the cores the training competes for.
                with contextlib.suppress(AttributeError, OSError):
                    nice = min(os.getpriority(os.PRIO_PROCESS, 0) + _RETRAIN_NICE, 19)
                    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
                if self.config.threads is not None:  # OpenMP settings are per thread
                    _import_faiss().omp_set_num_threads(self.config.threads)
                job.result = self._build(kind, *self._load_shard(domain, max_id))
            except BaseException as e:  # reported by install_retrained, on the owner's thread
                job.error = e
            finally:
                job.done.set()

        if isinstance(shard, HNSWIndex):
            logger.info(
                "Compacting the HNSW index of %r (%d live vectors, %d tombstones) in the background",
                domain,
                len(shard),
                shard.tombstones,
            )
        else:
            logger.info("Retraining the IVF index of %r (%d vectors) in the background", domain, len(shard))
        threading.Thread(target=train, name=f"dreamgym-{kind}-rebuild-{domain}", daemon=True).start()

    def retraining(self) -> list[str]:
        """Domains whose shard is being retrained or compacted now."""
        return sorted(self._retrains)

    def install_retrained(self) -> None:
        """Swap in every shard whose rebuild has finished, after replaying what its old one took since."""
        for domain, job in list(self._retrains.items()):
            if not job.done.is_set():
                continue
            del self._retrains[domain]
            if self.shards.get(domain) is not job.shard:
                continue
            if job.result is None:
                # Keep the old index; try again only once it has grown (or piled up tombstones) as much
                # once more.
                if isinstance(job.shard, HNSWIndex):
                    job.shard.compact_floor = 2 * job.shard.tombstones
                else:
                    job.shard.trained_size = max(job.shard.trained_size, len(job.shard))
                logger.warning(
                    "Rebuilding the %s index of %r failed (%r); keeping the old one",
                    job.shard.kind,
                    domain,
                    job.error,
                )
                continue
            new = job.result
            for ids, vectors in job.journal:
                if vectors is None:
                    new.remove(ids)
                else:
                    new.add(ids, vectors)
            self.shards[domain] = new

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every retrain running now has finished training; ``True`` if all did in time.

        Only waits: the new shards are swapped in by the next call (or :meth:`install_retrained`).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for job in list(self._retrains.values()):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not job.done.wait(left):
                return False
        return True

    def wait_for_retrain(self, timeout: float | None = None) -> bool:
        """:meth:`join` then :meth:`install_retrained`: afterwards no retrain is pending (if in time)."""
        finished = self.join(timeout)
        self.install_retrained()
        return finished

    # -- updates and queries ----------------------------------------------------------------------

    def remove(self, domain: str, ids: np.ndarray) -> None:
        """Remove ids from a domain's shard, compacting an HNSW shard whose tombstones have piled up."""
        self.install_retrained()
        shard = self.shards.get(domain)
        if shard is None:
            return
        shard.remove(ids)
        job = self._retrains.get(domain)
        if job is not None:
            job.journal.append((np.array(ids, dtype=np.int64), None))
        elif isinstance(shard, HNSWIndex) and self._compaction_due(shard):
            self._rebuild(domain, shard)

    def search(self, query: np.ndarray, k: int, domain: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (ids, scores) in one domain, or merged across all domains."""
        if self._retrains:
            self.install_retrained()
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

    def save(self, directory: Path, watermark: int, eviction_seq: int, token: str) -> list[Path]:
        """Write every approximate shard atomically under ``token``; returns the files written.

        Each shard goes to a temporary file named after this process, renamed into place once whole,
        so a reader never sees half a snapshot and a killed save leaves a file :meth:`load` removes.
        Exact shards are rebuilt from the store instead. Older snapshots stay until :meth:`prune`.
        """
        self.install_retrained()
        written: list[Path] = []
        for domain, shard in self.shards.items():
            if not isinstance(shard, IVFIndex | HNSWIndex):
                continue
            directory.mkdir(parents=True, exist_ok=True)
            stem = domain.encode().hex()
            target = directory / f"{stem}.{shard.kind}.s{token}.w{watermark}.e{eviction_seq}.faiss"
            tmp = directory / f".{stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            try:
                shard.save(str(tmp))
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
            written.append(target)
        return written

    @staticmethod
    def prune(directory: Path, keep: Sequence[Path]) -> None:
        """Delete every snapshot in ``directory`` but ``keep`` (those of earlier saves and other files)."""
        if not directory.is_dir():
            return
        names = {p.name for p in keep}
        for path in directory.iterdir():
            if path.name not in names and (_SNAPSHOT.match(path.name) or _LEGACY_SNAPSHOT.match(path.name)):
                path.unlink(missing_ok=True)

    @staticmethod
    def remove_stale_temporaries(directory: Path) -> list[str]:
        """Delete the temporary files of saves that were killed (their process is gone); returns names."""
        removed: list[str] = []
        if not directory.is_dir():
            return removed
        now = time.time()
        for path in directory.iterdir():
            match = _TEMP.match(path.name)
            stale = (match is not None and not _pid_alive(int(match["pid"]))) or (
                _LEGACY_TEMP.match(path.name) is not None and now - path.stat().st_mtime > _LEGACY_TEMP_AGE_S
            )
            if stale:
                path.unlink(missing_ok=True)
                removed.append(path.name)
        if removed:
            logger.info(
                "Removed %d temporary files of interrupted index saves in %s", len(removed), directory
            )
        return removed

    def load(
        self, directory: Path, token: str | None, max_id: int, max_eviction_seq: int, *, tidy: bool = True
    ) -> dict[str, tuple[int, int]]:
        """Load the snapshot of each domain that the database's last save wrote, if its kind is wanted.

        A snapshot is only taken for the database it came from as it was then or later: its name must
        carry ``token`` (what the database recorded at its last save) and its watermark and eviction
        sequence must not be past the database's own (``max_id``, ``max_eviction_seq``). Anything else
        (a snapshot of a deleted or replaced file, of a restored older copy) is left for :meth:`prune`
        and the shard is rebuilt from the store.

        ``tidy`` also deletes the temporary files of killed saves; a read-only buffer, which must
        leave the files as they are, passes ``False``.

        Returns:
            domain -> (watermark, eviction sequence) of each loaded shard.
        """
        loaded: dict[str, tuple[int, int]] = {}
        if not directory.is_dir():
            return loaded
        if tidy:
            self.remove_stale_temporaries(directory)
        best: dict[str, tuple[int, int, str, Path]] = {}
        rejected: list[str] = []
        for path in directory.iterdir():
            match = _SNAPSHOT.match(path.name)
            if not match:
                if _LEGACY_SNAPSHOT.match(path.name):
                    rejected.append(path.name)
                continue
            wm, ev = int(match["wm"]), int(match["ev"])
            if token is None or match["token"] != token or wm > max_id or ev > max_eviction_seq:
                rejected.append(path.name)
                continue
            domain = bytes.fromhex(match["domain"]).decode()
            key = (wm, ev, match["kind"], path)
            if domain not in best or key[:2] > best[domain][:2]:
                best[domain] = key
        if rejected:
            logger.info(
                "Index snapshots in %s not of this database as it is now (rebuilt from the store instead): %s",
                directory,
                ", ".join(sorted(rejected)),
            )
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
            self._max_id[domain] = wm
            loaded[domain] = (wm, ev)
        return loaded
