"""Typed configuration of the replay buffer: where it lives, how it embeds, how it searches, what it keeps."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dreamgym_env.storage.urls import redact

StorePolicy = Literal["all", "real", "none"]
"""Which transitions offered online through ``add`` are kept: every one, only grounded ones
(``offline``/``real``, never ``sim``), or none (the buffer stays as it was seeded)."""


class EmbedderConfig(BaseModel):
    """Which embedder turns (state, action) pairs into vectors.

    Attributes:
        kind: ``"hashing"`` (default: deterministic, offline, numpy only), ``"sentence-transformers"``
            (a local model directory or name; needs the ``embeddings`` extra) or ``"openai"`` (any
            OpenAI-compatible ``/v1/embeddings`` endpoint, e.g. vLLM serving an embedding model).
        dim: Output dimension of the hashing embedder (ignored by the others, which report their own).
        model: Model path or name for ``sentence-transformers`` and ``openai``.
        base_url: Endpoint of the ``openai`` embedder, e.g. ``http://127.0.0.1:8000/v1``. Falls back to
            the ``DREAMGYM_EMBEDDING_BASE_URL`` environment variable.
        api_key_env: Name of the environment variable holding the API key (never the key itself, so
            configs can be saved and logged safely).
        batch_size: Texts per embedding call.
        action_weight: Weight of the action's embedding against the state's in the retrieval key
            ``normalize(e(state) + w * e(action))``. Without it a long state drowns a short action.
        timeout_s: Request timeout of the ``openai`` embedder.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["hashing", "sentence-transformers", "openai"] = "hashing"
    dim: int = Field(default=256, ge=8, le=65536)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "DREAMGYM_EMBEDDING_API_KEY"
    batch_size: int = Field(default=256, ge=1)
    action_weight: float = Field(default=1.0, ge=0.0)
    timeout_s: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _model_required(self) -> EmbedderConfig:
        if self.kind != "hashing" and not self.model:
            raise ValueError(
                f"embedder kind {self.kind!r} needs a model (a local directory or a served model name); "
                "set EmbedderConfig(model=...) or use kind='hashing', which needs none"
            )
        return self


class IndexConfig(BaseModel):
    """How the in-memory vector index searches.

    Attributes:
        kind: ``"auto"`` (exact below ``threshold`` vectors per domain, ``approximate`` above),
            ``"exact"`` (always brute force) or ``"ivf"``/``"hnsw"`` (faiss approximate search as soon
            as a domain has ``min_train`` vectors; needs the ``buffer`` extra).
        approximate: The approximate kind ``auto`` switches to.
        threshold: Vectors per domain above which ``auto`` switches to approximate search.
        nlist: IVF cells; ``None`` picks ``4 * sqrt(n)`` at training time (at least 39 training vectors a
            cell, at most 65536 cells).
        nprobe: IVF cells visited per query (recall against speed).
        ivf_codes: How IVF cells hold their vectors. ``"fp16"`` (default): half precision, half the
            memory and scan time of ``"flat"`` float32, scores within about 1e-3 of exact, the same
            neighbours. ``"sq8"``: one byte a dimension, a quarter of the memory, coarser scores.
        hnsw_m: HNSW graph degree.
        ef_construction: HNSW build-time beam width.
        ef_search: HNSW query-time beam width.
        hnsw_compact_ratio: Rebuild an HNSW shard from its live vectors once its tombstones (evicted
            ids, which an HNSW graph cannot delete) outnumber its live vectors this many times; 1.0 by
            default: once the dead outnumber the live. Every search asks the graph for ``k`` plus all
            tombstones, so they slow it as they pile up (measured: 20,000 vectors of which 19,000 dead,
            2.4 ms a query against 0.11 ms compacted). A rebuild costs about as much as building the
            live rows once, and comes only after ``ratio`` evictions per live row, so its cost per
            eviction stays bounded. ``None``: never compact.
        retrain_growth: Retrain an IVF index once its domain has grown this many times past the size it
            was trained on, so its cells keep fitting the data.
        background_retrain: Retrain IVF and compact HNSW indexes on a background thread (default). The old index keeps serving
            searches and taking adds and removals meanwhile, and the new one, brought up to date, takes
            its place at the next index call; training a million vectors takes about a minute, which
            inline would stall that one step. ``False`` retrains inline, in the call that outgrew it.
        min_train: Fewest vectors an approximate index is trained on.
        persist: Save approximate indexes next to a file-backed buffer on close and restore them on
            reopen (only rows added since are indexed, from their stored vectors). A snapshot is loaded
            only into the database that saved it, as it was at the save or later: each save records a
            random token in the database and in the snapshot's name, so a snapshot left by a deleted,
            replaced or restored file is rebuilt from the store instead.
        threads: faiss OpenMP threads for building and training (``None``: faiss's default, all cores).
        query_threads: BLAS/OpenMP threads for one query. 1 by default: a single query is too small to
            gain from a thread pool, and waking one costs 10-50x the query itself on a busy machine
            (measured: 10k x 256 exact search, 8 ms with 2 BLAS threads, 0.18 ms with 1).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["auto", "exact", "ivf", "hnsw"] = "auto"
    approximate: Literal["ivf", "hnsw"] = "ivf"
    threshold: int = Field(default=10_000, ge=1)
    nlist: int | None = Field(default=None, ge=1)
    nprobe: int = Field(default=128, ge=1)
    ivf_codes: Literal["flat", "fp16", "sq8"] = "fp16"
    hnsw_m: int = Field(default=32, ge=4)
    ef_construction: int = Field(default=80, ge=8)
    ef_search: int = Field(default=64, ge=1)
    hnsw_compact_ratio: float | None = 1.0
    retrain_growth: float = Field(default=4.0, gt=1.0)
    background_retrain: bool = True
    min_train: int = Field(default=1_000, ge=1)
    persist: bool = True
    threads: int | None = Field(default=None, ge=1)
    query_threads: int = Field(default=1, ge=1)

    @field_validator("hnsw_compact_ratio")
    @classmethod
    def _positive_ratio(cls, ratio: float | None) -> float | None:
        if ratio is not None and not (math.isfinite(ratio) and ratio > 0):
            raise ValueError(
                "hnsw_compact_ratio must be a positive number of tombstones per live vector past which "
                f"an HNSW shard is rebuilt (e.g. 1.0, the default), or None to never compact; got {ratio!r}"
            )
        return ratio


class BufferConfig(BaseModel):
    """Everything a :class:`~dreamgym_env.buffer.ReplayBuffer` needs.

    Attributes:
        path: SQLite file (created if missing), ``":memory:"`` for a throwaway buffer, or a PostgreSQL
            URL (``postgresql://user:password@host:5432/dbname``, needs the ``postgres`` extra) for one
            buffer shared by every process of a cluster.
        create: Create a missing SQLite file (default). ``False`` makes a missing file an error, and a
            file without the buffer's tables (a task pool, a recording) too, for tools that work on an
            existing buffer and must not leave an empty one behind.
        read_only: Open an existing SQLite buffer for reading only (SQLite's ``mode=ro``), for tools
            that must leave the file as it was (``dreamgym buffer stats|search|export``): a file that
            is not a buffer is refused, saying what it is; an embedder other than the file's is refused
            instead of re-embedding every row; no index snapshot is saved or tidied; writes raise
            :class:`~dreamgym_env.errors.StoreError`. A missing file is an error, whatever ``create``.
        embedder: The embedder; changing it on an existing file re-embeds every row on open.
        index: The vector index.
        store_policy: Which transitions ``add`` keeps (see :data:`StorePolicy`). Imports through
            ``add_many`` always store.
        max_synthetic: Cap on simulated (``source="sim"``) transitions; the oldest are evicted past it.
            Offline and real transitions are never evicted. ``None``: no cap.
        dedup: ``"content"`` stores one copy of each (domain, state, action, next state) per provenance
            (grounded: offline/real; synthetic: sim). ``"episode"`` also keys on episode id and step, so
            only a repeated offer of the same step is dropped.
        k: Default number of demonstrations ``retrieve`` returns.
        busy_timeout_s: How long a writer waits for another process's write lock before failing.
        synchronous: SQLite ``synchronous`` pragma. ``NORMAL`` in WAL mode keeps every committed
            transaction across a process crash; ``FULL`` also across a power loss (slower commits).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = ":memory:"
    create: bool = True
    read_only: bool = False
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    store_policy: StorePolicy = "all"
    max_synthetic: int | None = Field(default=None, ge=0)
    dedup: Literal["content", "episode"] = "content"
    k: int = Field(default=4, ge=1)
    busy_timeout_s: float = Field(default=30.0, gt=0)
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """``repr``/``str`` show ``path`` as :func:`~dreamgym_env.storage.redact` does (no URL password)."""
        for name, value in super().__repr_args__():
            yield name, redact(value) if name == "path" and isinstance(value, str) else value
