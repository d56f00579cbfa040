"""The experience replay buffer: durable transitions plus an in-memory similarity index over them.

Retrieval keeps the simulator factual: each step the experience model sees the stored transitions whose
(state, action) is most similar to the current one. The buffer is seeded with offline real data and
grows with online interactions. Its store is SQLite (every committed transition survives a crash and
several processes may write at once); its index lives in memory, next to the store, and catches up with
other processes' writes before each search.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import secrets
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dreamgym_env.buffer.config import BufferConfig
from dreamgym_env.buffer.embedders import Embedder, build_embedder, embed_pairs
from dreamgym_env.buffer.index import ShardedIndex
from dreamgym_env.buffer.store import Store, StoredRow, open_store
from dreamgym_env.buffer.validation import transition_problem
from dreamgym_env.errors import ConfigError, DataFormatError, StoreError
from dreamgym_env.records import Transition
from dreamgym_env.retrieval import RetrievalQuery
from dreamgym_env.storage.urls import is_postgres_url

logger = logging.getLogger(__name__)

_SNAPSHOT_TOKEN = "index_snapshot"
"""Meta key: the token of the last index save, which its snapshot files' names carry."""

_KEY_CACHE_SIZE = 4096
"""Recent query keys remembered for the write that follows: an env retrieves for (state, action), then
stores the transition under that same key, so each step embeds once. Enough for a vector env of
thousands of sub-envs."""


class ScoredTransition(NamedTuple):
    """A retrieved transition with its row id and cosine similarity to the query."""

    id: int
    score: float
    transition: Transition


class AddResult(NamedTuple):
    """What a write did."""

    stored: int
    duplicates: int
    filtered: int
    evicted: int


def dedup_key(transition: Transition, mode: str = "content") -> bytes:
    """The 16-byte key under which a transition is stored once.

    ``content``: (domain, state, action, next state, provenance), where provenance is ``grounded``
    (offline or real) or ``synthetic`` (sim). The simulator repeating what is already stored adds
    nothing, and a simulated transition never hides a real one (which would then be lost to eviction).
    ``episode`` adds the episode id and step, so only the same step offered twice is dropped.
    """
    provenance = "synthetic" if transition.source == "sim" else "grounded"
    parts = [transition.domain, transition.state, transition.action, transition.next_state, provenance]
    if mode == "episode":
        parts += [transition.episode_id, str(transition.step)]
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).digest()


_SQLITE_HEADER = b"SQLite format 3\x00"
_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
"""Files SQLite keeps beside a database; writing over one of them loses or corrupts its rows."""


def check_export_target(path: str | Path, buffer_path: str | None = None) -> Path:
    """The file an export may write to, refused before anything is opened for writing.

    An export replaces its target whole, so a target that holds data this package keeps elsewhere
    would be lost: the buffer being exported (under any name: a link, a relative path), one of
    SQLite's files beside it, or any other SQLite database (a buffer, a task pool, a recording). A
    folder that does not exist is not created, so a typo never leaves folders behind.

    Args:
        path: Where the JSONL would go.
        buffer_path: The SQLite file being exported, if it is one.

    Raises:
        StoreError: the target is refused; the message says why and what is accepted.
    """
    if not str(path).strip():
        raise StoreError("the export's destination is empty: give the path of a .jsonl file to write")
    target = Path(path).expanduser()
    if target.is_dir():
        raise StoreError(
            f"{target} is a directory: give the path of a file, e.g. {target / 'transitions.jsonl'}"
        )
    if not target.parent.is_dir():
        what = "is not a directory" if target.parent.exists() else "does not exist"
        raise StoreError(f"cannot export to {target}: the folder {target.parent} {what} (it is not created)")
    if buffer_path is not None:
        if target.exists() and Path(buffer_path).exists() and os.path.samefile(target, buffer_path):
            raise StoreError(
                f"{target} is the buffer being exported: give another file for the JSONL (the buffer "
                "stays as it is)"
            )
        resolved = target.resolve()
        for suffix in _SQLITE_COMPANIONS:
            if resolved == Path(f"{buffer_path}{suffix}").resolve():
                raise StoreError(
                    f"{target} is SQLite's {suffix} file of the buffer being exported: give another file "
                    "for the JSONL"
                )
    if target.exists() and not target.is_file():
        raise StoreError(
            f"{target} is not a regular file (a device, a pipe?): an export replaces its file whole, so "
            "give the path of a .jsonl file"
        )
    if target.is_file():
        try:
            with target.open("rb") as f:
                header = f.read(len(_SQLITE_HEADER))
        except OSError as e:
            raise StoreError(f"cannot export to {target}: {e.strerror or e}") from e
        if header == _SQLITE_HEADER:
            raise StoreError(
                f"{target} is a SQLite database (a buffer, a task pool or a recording?): export writes "
                "JSONL and never replaces a database; give a .jsonl file"
            )
    # A link is followed: the file it names is replaced, never the link itself.
    return Path(os.path.realpath(target)) if target.is_symlink() else target


class ReplayBuffer:
    """Stores transitions durably and retrieves the top-k most similar to a (state, action).

    Implements :class:`dreamgym_env.retrieval.Retriever`. Usable as a context manager; one object may be
    shared by the threads of a process, and each process opens its own on the same file.

    Example:
        >>> with ReplayBuffer.open(":memory:") as buffer:
        ...     buffer.add_many(transitions)
        ...     demos = buffer.retrieve(state, action, k=4, domain="webshop", exclude_episode=episode_id)

    Args:
        config: Buffer settings; ``None`` for the defaults.
        embedder: An embedder object to use instead of building the one ``config.embedder`` describes.
        **overrides: Top-level ``BufferConfig`` fields (``path=...``, ``k=...``) applied over ``config``.
    """

    def __init__(
        self, config: BufferConfig | None = None, *, embedder: Embedder | None = None, **overrides: Any
    ) -> None:
        base = config or BufferConfig()
        self.config = BufferConfig.model_validate({**base.model_dump(), **overrides}) if overrides else base
        self.embedder = embedder if embedder is not None else build_embedder(self.config.embedder)
        self._lock = threading.RLock()
        self._key_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._seen_version: int | None = None  # the store's data_version when the index last caught up
        reading = "read_only=True" if self.config.read_only else "create=False"
        if (
            (not self.config.create or self.config.read_only)
            and self._local_file()
            and not Path(self.config.path).exists()
        ):
            raise StoreError(
                f"replay buffer {self.config.path} does not exist (opened with {reading}, which reads "
                "an existing buffer and never makes an empty one); check the path"
            )
        self.store: Store = open_store(
            self.config.path,
            self.config.busy_timeout_s,
            self.config.synchronous,
            read_only=self.config.read_only,
            create=self.config.create,
        )
        self._closed = False
        try:
            self._check_embedder()
            self.index = ShardedIndex(self.embedder.dim, self.config.index, self._load_shard)
            self._watermark = 0
            self._eviction_seq = 0
            self._restore()
        except BaseException:
            self._closed = True
            self.store.close()
            raise

    @classmethod
    def open(cls, path: str | Path = ":memory:", **kwargs: Any) -> ReplayBuffer:
        """Open (or create) the buffer at ``path``; keyword arguments are ``BufferConfig`` fields."""
        embedder = kwargs.pop("embedder", None)
        if isinstance(embedder, dict):
            kwargs["embedder"] = embedder
            embedder = None
        return cls(BufferConfig(path=str(path), **kwargs), embedder=embedder)

    # -- lifecycle ----------------------------------------------------------------------------------

    def _local_file(self) -> bool:
        """Whether the store is a SQLite file (index snapshots are kept next to it)."""
        return self.config.path != ":memory:" and not is_postgres_url(self.config.path)

    def _persistent(self) -> bool:
        return self._local_file() and self.config.index.persist

    def _check_writable(self) -> None:
        if self.config.read_only:
            raise StoreError(
                f"the replay buffer {self.store.path} was opened read-only (read_only=True) and takes no "
                "writes; open it without read_only to add to it"
            )

    def _check_embedder(self) -> None:
        """Re-embed every stored row, in one transaction, when the embedder changed since the file was written.

        All rows and the new signature commit together, so a process killed part-way leaves the file
        as it was (every row under the old embedder), never rows of two embedders under one signature.
        The snapshot token is cleared in the same transaction: no saved index of the old vectors loads.
        """
        signature = self.embedder.signature
        stored = self.store.get_meta("embedder")
        if stored == signature:
            return
        if self.config.read_only:
            if stored is None:  # never written with any embedder: nothing to re-embed
                return
            raise StoreError(
                f"{self.store.path} was embedded with {stored}, and this buffer's embedder is {signature}: "
                "reading it with another embedder would re-embed every row, which a read-only buffer "
                "does not do; open it with the embedder it was built with (on the command line: "
                "--embedder, --embedding-model, --dim)"
            )
        with self.store.transaction():
            if stored is not None and self.store.count() > 0:
                for batch in self.store.iter_pairs():
                    ids, states, actions = zip(*batch, strict=True)
                    vectors = embed_pairs(self.embedder, states, actions, self.config.embedder.action_weight)
                    self.store.replace_embeddings(zip(ids, vectors, strict=True))
                self.store.set_meta(_SNAPSHOT_TOKEN, "")
            self.store.set_meta("embedder", signature)
        if stored is not None and self._local_file():
            ShardedIndex.prune(ShardedIndex.snapshot_dir(self.config.path), keep=[])

    def _vectors_of(self, rows: Sequence[StoredRow]) -> np.ndarray:
        """The rows' stored embeddings as one matrix, mending rows of another size first.

        Rows whose vector is not of this embedder's size were left by an interrupted re-embedding of
        an older version: while the file names this embedder, they are re-embedded from their text (one
        transaction). When the file names another embedder, another process re-embedded it under this
        one: that is an error, since this buffer's vectors no longer match the file's.
        """
        dim = self.embedder.dim
        wrong = [r.id for r in rows if r.embedding.shape[0] != dim]
        if not wrong:
            return np.stack([r.embedding for r in rows])
        example = next(r for r in rows if r.embedding.shape[0] != dim)
        stored = self.store.get_meta("embedder")
        if stored != self.embedder.signature:
            raise StoreError(
                f"{self.store.path}: row {example.id} holds a {example.embedding.shape[0]}-d embedding, but "
                f"this buffer's embedder ({self.embedder.signature}) makes {dim}-d vectors: another process "
                f"re-embedded the buffer with {stored}. Reopen it with that embedder"
            )
        logger.warning(
            "Replay buffer (%s): %d rows hold embeddings of another size (from an interrupted "
            "re-embedding); re-embedding them with %s",
            self.store.path,
            len(wrong),
            self.embedder.signature,
        )
        fixed: dict[int, np.ndarray] = {}
        if self.config.read_only:  # mended in memory only: a read-only buffer leaves the file as it is
            chunk = self.store.get(wrong)
            vectors = embed_pairs(
                self.embedder,
                [chunk[i].state for i in wrong],
                [chunk[i].action for i in wrong],
                self.config.embedder.action_weight,
            )
            fixed.update(zip(wrong, vectors, strict=True))
            return np.stack([fixed.get(r.id, r.embedding) for r in rows])
        with self.store.transaction():
            for start in range(0, len(wrong), 4096):
                chunk = self.store.get(wrong[start : start + 4096])
                ids = list(chunk)
                vectors = embed_pairs(
                    self.embedder,
                    [chunk[i].state for i in ids],
                    [chunk[i].action for i in ids],
                    self.config.embedder.action_weight,
                )
                self.store.replace_embeddings(zip(ids, vectors, strict=True))
                fixed.update(zip(ids, vectors, strict=True))
        return np.stack([fixed.get(r.id, r.embedding) for r in rows])

    def _load_shard(self, domain: str, max_id: int) -> tuple[np.ndarray, np.ndarray]:
        """A domain's stored rows with ``id <= max_id`` (what its shard holds): ids and vectors."""
        rows: list[StoredRow] = []
        # Small reads: this runs beside searches when retraining, and each read holds the store's lock.
        for batch in self.store.rows_after(0, batch_size=2048):
            rows.extend(row for row in batch if row.domain == domain and row.id <= max_id)
            if batch[-1].id >= max_id:
                break
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.asarray([r.id for r in rows], dtype=np.int64), self._vectors_of(rows)

    def _restore(self) -> None:
        """Load saved approximate shards, then add what was committed after their watermarks."""
        loaded: dict[str, tuple[int, int]] = {}
        if self._persistent():
            loaded = self.index.load(
                ShardedIndex.snapshot_dir(self.config.path),
                self.store.get_meta(_SNAPSHOT_TOKEN) or None,
                self.store.max_id(),
                self.store.max_eviction_seq(),
                tidy=not self.config.read_only,
            )
        eviction_seq = self.store.max_eviction_seq()
        if loaded:
            # Removing an id twice is harmless, so every eviction of a restored domain is replayed.
            by_domain: dict[str, list[int]] = defaultdict(list)
            for _, row_id, domain in self.store.evictions_after(0):
                if domain in loaded:
                    by_domain[domain].append(row_id)
            for domain, ids in by_domain.items():
                self.index.remove(domain, np.asarray(ids, dtype=np.int64))
        start = min((wm for wm, _ in loaded.values()), default=0)
        if len(loaded) < len(self._stored_domains()):
            start = 0
        self._watermark = start
        self._catch_up(skip=loaded)
        self._eviction_seq = eviction_seq
        self._apply_evictions()

    def _stored_domains(self) -> set[str]:
        return {domain for domain, _, _ in self.store.stats()}

    def close(self) -> None:
        """Save approximate shards (file-backed buffers) and close the store. Idempotent."""
        if getattr(self, "_closed", True):
            return
        with self._lock:
            try:
                if self._persistent() and not self.config.read_only:
                    self.save_index()
            except StoreError as e:  # a snapshot is only a shortcut: the next open rebuilds the index
                logger.warning("Replay buffer (%s): index not saved on close: %s", self.store.path, e)
            finally:
                self._closed = True
                self.store.close()

    def save_index(self) -> None:
        """Snapshot the approximate shards now, so a reopen only adds rows committed after this point."""
        with self._lock:
            self._check_writable()
            self._sync()
            if not self._local_file():
                raise ConfigError("an in-memory or PostgreSQL buffer has no file to save its index next to")
            directory = ShardedIndex.snapshot_dir(self.config.path)
            token = secrets.token_hex(8)
            written = self.index.save(directory, self._watermark, self._eviction_seq, token)
            if not written and not directory.is_dir():
                return
            # The token goes into the database once the files are whole, and older files go after it:
            # a reader sees either the previous save's token and files or this one's.
            self.store.set_meta(_SNAPSHOT_TOKEN, token if written else "")
            ShardedIndex.prune(directory, keep=written)

    def wait_for_index(self, timeout: float | None = None) -> bool:
        """Wait for background index retraining (IVF) and compaction (HNSW) to finish, and swap them in.

        Searches never wait for a rebuild (the old shard serves until the new one is ready); this is
        for tests, benchmarks and a clean snapshot. Returns ``False`` if ``timeout`` ran out first.
        """
        finished = self.index.join(timeout)
        with self._lock:
            self.index.install_retrained()
        return finished

    def __enter__(self) -> ReplayBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort; close() is the documented way
        try:
            if not getattr(self, "_closed", True):
                self.store.close()
        except Exception:
            pass

    # -- keeping the index in step with the store ---------------------------------------------------

    def _catch_up(self, skip: dict[str, tuple[int, int]] | None = None) -> None:
        for batch in self.store.rows_after(self._watermark):
            grouped: dict[str, tuple[list[int], list[StoredRow]]] = defaultdict(lambda: ([], []))
            for row in batch:
                if skip and row.domain in skip and row.id <= skip[row.domain][0]:
                    continue
                grouped[row.domain][0].append(row.id)
                grouped[row.domain][1].append(row)
            for domain, (ids, rows) in grouped.items():
                self.index.add(domain, np.asarray(ids, dtype=np.int64), self._vectors_of(rows))
            self._watermark = batch[-1].id

    def _apply_evictions(self) -> None:
        events = self.store.evictions_after(self._eviction_seq)
        if not events:
            return
        by_domain: dict[str, list[int]] = defaultdict(list)
        for _, row_id, domain in events:
            by_domain[domain].append(row_id)
        for domain, ids in by_domain.items():
            self.index.remove(domain, np.asarray(ids, dtype=np.int64))
        self._eviction_seq = events[-1][0]

    def _sync(self) -> None:
        """Bring the index up to date with every commit, this process's and others'.

        Our own writes reach the index as they are made (:meth:`_write`), so only other connections'
        commits need reading back, and ``data_version`` says in one pragma whether there were any.
        """
        if self._closed:
            raise StoreError("the replay buffer is closed")
        version = self.store.data_version()  # read first: a commit racing the catch-up is seen next time
        if version == self._seen_version:
            return
        self._catch_up()
        self._apply_evictions()
        self._seen_version = version

    # -- writes -------------------------------------------------------------------------------------

    def _wanted(self, transition: Transition) -> bool:
        policy = self.config.store_policy
        return policy == "all" or (policy == "real" and transition.source != "sim")

    def add(self, transition: Transition) -> None:
        """Offer one online transition; kept according to ``store_policy`` and deduplicated."""
        self.add_many([transition], apply_policy=True)

    def add_many(
        self, transitions: Iterable[Transition], *, apply_policy: bool = False, batch_size: int = 4096
    ) -> AddResult:
        """Store transitions in one transaction: the whole call commits, or (on any error) nothing does.

        Each transition is checked first (finite reward and timestamp, a step SQLite's 64-bit integers
        hold, valid Unicode text); a bad one raises :class:`~dreamgym_env.errors.DataFormatError`
        naming the field, and nothing of the call is stored. Transitions are embedded and inserted
        ``batch_size`` at a time, so an iterable of any length streams through; other writers wait
        for the transaction (up to their ``busy_timeout_s``), and the index takes the new rows once
        it has committed.

        Args:
            transitions: The transitions (any iterable; a generator is consumed once).
            apply_policy: Filter by ``store_policy`` as :meth:`add` does (imports leave it off).
            batch_size: Transitions embedded and inserted at a time.

        Returns:
            How many were stored, skipped as duplicates, filtered by the policy, and evicted.
        """
        self._check_writable()
        counts = {"filtered": 0}

        def batches() -> Iterator[list[Transition]]:
            batch: list[Transition] = []
            for t in transitions:
                if apply_policy and not self._wanted(t):
                    counts["filtered"] += 1
                    continue
                problem = transition_problem(t)
                if problem is not None:
                    raise DataFormatError(f"transition {t.episode_id!r} step {t.step}: {problem}")
                batch.append(t)
                if len(batch) >= batch_size:
                    yield batch
                    batch = []
            if batch:
                yield batch

        stream = batches()
        first = next(stream, None)
        second = next(stream, None) if first is not None else None
        if first is None:
            return AddResult(0, 0, counts["filtered"], 0)
        if second is None:  # one batch: one insert, its rows indexed straight away
            stored, duplicates, evicted = self._write(first)
            return AddResult(stored, duplicates, counts["filtered"], evicted)
        stored = duplicates = evicted = 0
        with self._lock:
            try:
                with self.store.transaction():
                    for batch in itertools.chain((first, second), stream):
                        keys = [dedup_key(t, self.config.dedup) for t in batch]
                        vectors = self._embed_keys(
                            [t.state for t in batch], [t.action for t in batch], remember=False
                        )
                        ids, gone = self.store.insert(batch, keys, vectors, self.config.max_synthetic)
                        new = sum(i is not None for i in ids)
                        stored, duplicates, evicted = (
                            stored + new,
                            duplicates + len(batch) - new,
                            evicted + len(gone),
                        )
            except BaseException:
                # Rolled back: a store counting its own commits (PostgreSQL) has counted these, so the
                # next look at data_version must not trust the last one seen.
                self._seen_version = None
                raise
            # Committed: the index reads the new rows back (and anyone else's), never ones rolled back.
            if not self._closed:
                self._catch_up()
                self._apply_evictions()
        self._log_evictions(evicted)
        return AddResult(stored, duplicates, counts["filtered"], evicted)

    def _log_evictions(self, evicted: int) -> None:
        if evicted:
            logger.info(
                "Replay buffer (%s): evicted %d simulated transitions, oldest first, to keep max_synthetic=%d",
                self.store.path,
                evicted,
                self.config.max_synthetic,
            )

    def _write(self, batch: Sequence[Transition]) -> tuple[int, int, int]:
        keys = [dedup_key(t, self.config.dedup) for t in batch]
        vectors = self._embed_keys([t.state for t in batch], [t.action for t in batch], remember=False)
        # One lock over the insert and the index update: no search of this process can catch up with
        # these rows in between and add them a second time.
        with self._lock:
            ids, evicted = self.store.insert(batch, keys, vectors, self.config.max_synthetic)
            if self._seen_version is not None and self.store.data_version() == self._seen_version:
                self._index_own_rows(batch, ids, vectors)  # nobody else committed: no need to read back
                if evicted:
                    self._apply_evictions()
            else:
                self._sync()
        self._log_evictions(len(evicted))
        stored = sum(i is not None for i in ids)
        return stored, len(batch) - stored, len(evicted)

    def _index_own_rows(
        self, batch: Sequence[Transition], ids: Sequence[int | None], vectors: np.ndarray
    ) -> None:
        grouped: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        for position, (t, row_id) in enumerate(zip(batch, ids, strict=True)):
            if row_id is not None:
                grouped[t.domain][0].append(row_id)
                grouped[t.domain][1].append(position)
        for domain, (row_ids, positions) in grouped.items():
            self.index.add(domain, np.asarray(row_ids, dtype=np.int64), vectors[positions])
            self._watermark = max(self._watermark, max(row_ids))

    def _embed_keys(self, states: Sequence[str], actions: Sequence[str], *, remember: bool) -> np.ndarray:
        """Retrieval keys of (state, action) pairs, reusing those of recent queries."""
        pairs = list(zip(states, actions, strict=True))
        with self._lock:
            hits = [self._key_cache.get(pair) for pair in pairs]
        misses = [i for i, v in enumerate(hits) if v is None]
        vectors = np.empty((len(pairs), self.embedder.dim), dtype=np.float32)
        if misses:
            vectors[misses] = embed_pairs(
                self.embedder,
                [states[i] for i in misses],
                [actions[i] for i in misses],
                self.config.embedder.action_weight,
            )
        for i, v in enumerate(hits):
            if v is not None:
                vectors[i] = v
        if remember and misses:
            with self._lock:
                for i in misses:  # copies: a view would keep its whole batch alive
                    self._key_cache[pairs[i]] = vectors[i].copy()
                while len(self._key_cache) > _KEY_CACHE_SIZE:
                    self._key_cache.popitem(last=False)
        return vectors

    # -- reads --------------------------------------------------------------------------------------

    def search(
        self,
        state: str,
        action: str,
        k: int | None = None,
        *,
        domain: str | None = None,
        exclude_episode: str | None = None,
    ) -> list[ScoredTransition]:
        """Top-k stored transitions by cosine similarity of their (state, action) key, with scores.

        Args:
            state: The current state.
            action: The action about to be simulated.
            k: How many (default ``config.k``).
            domain: Only this domain's transitions.
            exclude_episode: Leave out this episode's own transitions (so an episode is not shown itself).
        """
        k = self.config.k if k is None else k
        if k <= 0:
            return []
        return self.search_many([RetrievalQuery(state, action, k, domain, exclude_episode)])[0]

    def search_many(self, queries: Sequence[RetrievalQuery]) -> list[list[ScoredTransition]]:
        """:meth:`search` for many queries at once: one embedding call, one catch-up, one read of the rows.

        This is how a vector env serves all its sub-envs in one go; each answer is what :meth:`search`
        would return for that query alone.
        """
        if not queries:
            return []
        keys = self._embed_keys([q.state for q in queries], [q.action for q in queries], remember=True)
        excluded = (q.exclude_episode for q in queries if q.exclude_episode is not None)
        found: list[list[tuple[int, float]]] = []
        with self._lock:
            self._sync()
            # The episodes' own rows are dropped by id, so only the rows returned are read and decoded.
            own_rows = self.store.episode_row_ids(excluded)
            for query, key in zip(queries, keys, strict=True):
                if query.k <= 0:
                    found.append([])
                    continue
                own = (
                    own_rows.get(query.exclude_episode, set()) if query.exclude_episode is not None else set()
                )
                ids, scores = self.index.search(key, query.k + len(own), query.domain)
                hits = [(i, s) for i, s in zip(ids.tolist(), scores.tolist(), strict=True) if i not in own]
                found.append(hits[: query.k])
        rows = self.store.get(list(dict.fromkeys(i for hits in found for i, _ in hits)))
        return [[ScoredTransition(i, float(s), rows[i]) for i, s in hits if i in rows] for hits in found]

    def retrieve_many(self, queries: Sequence[RetrievalQuery]) -> list[list[Transition]]:
        """:meth:`retrieve` for many queries at once (the :class:`~dreamgym_env.retrieval.BatchRetriever` protocol)."""
        return [[s.transition for s in hits] for hits in self.search_many(queries)]

    def retrieve(
        self,
        state: str,
        action: str,
        k: int | None = None,
        *,
        domain: str | None = None,
        exclude_episode: str | None = None,
    ) -> list[Transition]:
        """Up to ``k`` transitions most similar to (state, action), best first (the Retriever protocol)."""
        return [
            s.transition
            for s in self.search(state, action, k, domain=domain, exclude_episode=exclude_episode)
        ]

    def __len__(self) -> int:
        return self.store.count()

    def stats(self) -> dict[str, Any]:
        """Counts per domain and source, index kinds and sizes, embedder and path."""
        with self._lock:
            self._sync()
            shards = {d: {"kind": s.kind, "size": len(s)} for d, s in self.index.shards.items()}
        return {
            "path": self.store.path,
            "transitions": len(self),
            "by_domain_source": [{"domain": d, "source": s, "count": c} for d, s, c in self.store.stats()],
            "embedder": self.embedder.signature,
            "index": shards,
        }

    def iter_transitions(
        self, *, domain: str | None = None, source: str | None = None
    ) -> Iterable[Transition]:
        """Every stored transition in insertion order."""
        return self.store.iter_transitions(domain=domain, source=source)

    def export_jsonl(self, path: str | Path, *, domain: str | None = None, source: str | None = None) -> int:
        """Write transitions in the package's JSONL format (one per line); returns how many.

        The lines go to a temporary file beside ``path``, renamed over it once whole: an export that
        fails part-way (a store error, a full disk) leaves an earlier file at ``path`` as it was and
        no partial file, and a reader never sees half an export.

        Raises:
            StoreError: ``path`` is refused (see :func:`check_export_target`) or cannot be written.
        """
        target = check_export_target(path, self.config.path if self._local_file() else None)
        tmp = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        n = 0
        try:
            # O_EXCL: never follow or reuse a file already there; 0o666 lets the umask decide the mode,
            # as for any file the user writes.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for t in self.iter_transitions(domain=domain, source=source):
                    f.write(t.model_dump_json() + "\n")
                    n += 1
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except OSError as e:
            raise StoreError(f"cannot write the export to {target}: {e.strerror or e}") from e
        finally:
            tmp.unlink(missing_ok=True)
        return n

    def __repr__(self) -> str:
        return f"ReplayBuffer(path={self.store.path!r}, embedder={self.embedder.signature!r})"
