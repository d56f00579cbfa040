"""Experience replay buffer: durable transitions, embedders, a similarity index and offline-data loaders.

``ReplayBuffer`` implements :class:`dreamgym_env.retrieval.Retriever`. faiss loads only when a domain
grows past the exact-search threshold; sentence-transformers and the OpenAI client only when chosen.
"""

from __future__ import annotations

from dreamgym_env.buffer.config import BufferConfig, EmbedderConfig, IndexConfig, StorePolicy
from dreamgym_env.buffer.embedders import (
    Embedder,
    HashingEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    build_embedder,
    embed_pairs,
)
from dreamgym_env.buffer.loaders import (
    FORMATS,
    ImportReport,
    LoadIssue,
    detect_format,
    import_files,
    iter_records,
)
from dreamgym_env.buffer.replay_buffer import AddResult, ReplayBuffer, ScoredTransition, dedup_key
from dreamgym_env.buffer.store import TransitionStore

__all__ = [
    "FORMATS",
    "AddResult",
    "BufferConfig",
    "Embedder",
    "EmbedderConfig",
    "HashingEmbedder",
    "ImportReport",
    "IndexConfig",
    "LoadIssue",
    "OpenAIEmbedder",
    "ReplayBuffer",
    "ScoredTransition",
    "SentenceTransformerEmbedder",
    "StorePolicy",
    "TransitionStore",
    "build_embedder",
    "dedup_key",
    "detect_format",
    "embed_pairs",
    "import_files",
    "iter_records",
]
