"""Embedders: text to L2-normalised float32 vectors, and the (state, action) retrieval key built from them.

Three embedders share one small protocol:

* :class:`HashingEmbedder` (default): signed feature hashing of character n-grams and words into a fixed
  dimension. Deterministic across processes and machines, needs no weights, numpy only, and fast
  (a whole batch is hashed with a handful of vectorised numpy operations).
* :class:`SentenceTransformerEmbedder`: any local sentence-transformers model (``embeddings`` extra).
* :class:`OpenAIEmbedder`: an OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM serves embedding
  models this way).

The retrieval key follows the paper: the pair (state, action), built by :func:`embed_pairs` as
``normalize(e(state) + w * e(action))`` so that a short action is not drowned by a long state.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from dreamgym_env._openai_client import endpoint_errors, sync_client
from dreamgym_env.buffer.config import EmbedderConfig
from dreamgym_env.errors import ConfigError, DependencyNotInstalled

if TYPE_CHECKING:
    import openai


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into rows of an (n, dim) float32 array with unit L2 norm (zero rows for empty text)."""

    @property
    def dim(self) -> int:
        """Dimension of the vectors."""
        ...

    @property
    def signature(self) -> str:
        """Names the embedding space; vectors from embedders with different signatures are not comparable."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an (len(texts), dim) float32 array of unit rows."""
        ...


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Return ``x`` as float32 with unit-norm rows; all-zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def embed_pairs(
    embedder: Embedder, states: Sequence[str], actions: Sequence[str], action_weight: float = 1.0
) -> np.ndarray:
    """Embed (state, action) pairs into retrieval keys, one embedding call for both halves.

    Args:
        embedder: Any :class:`Embedder`.
        states: States, one per pair.
        actions: Actions, one per pair (same length as ``states``).
        action_weight: Weight of the action vector in ``normalize(e(state) + w * e(action))``.

    Returns:
        An (n, dim) float32 array of unit rows.
    """
    if len(states) != len(actions):
        raise ValueError(f"got {len(states)} states but {len(actions)} actions; pass one action per state")
    n = len(states)
    if n == 0:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    both = embedder.embed([*states, *actions])
    return l2_normalize(both[:n] + np.float32(action_weight) * both[n:])


# Odd 64-bit constants (from splitmix64) that spread the polynomial hash of an n-gram over all bits.
_MULT = np.uint64(0x100000001B3)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(30))
    h = h * _MIX1
    h = h ^ (h >> np.uint64(27))
    h = h * _MIX2
    return h ^ (h >> np.uint64(31))


class HashingEmbedder:
    """Signed hashing of character n-grams and words into ``dim`` buckets, log-scaled and normalised.

    Texts are lower-cased and their whitespace collapsed, so formatting differences do not move a
    vector. Hashes are computed from bytes with fixed constants (never Python's salted ``hash``), so
    the same text gives the same vector in every process, which is what lets several processes share
    one stored index.

    Args:
        dim: Number of buckets (the vector dimension).
        ngram_sizes: Character n-gram lengths (bytes of the UTF-8 text, padded with one space each side).
        word_weight: Weight of whole-word features against character n-grams.
    """

    def __init__(
        self, dim: int = 256, ngram_sizes: Sequence[int] = (3, 4, 5), word_weight: float = 1.0
    ) -> None:
        if dim < 1:
            raise ConfigError(f"HashingEmbedder dim must be positive, got {dim}")
        if not ngram_sizes or min(ngram_sizes) < 1:
            raise ConfigError(f"ngram_sizes must be positive integers, got {list(ngram_sizes)}")
        self._dim = int(dim)
        self._sizes = tuple(int(n) for n in ngram_sizes)
        self._word_weight = float(word_weight)

    @property
    def dim(self) -> int:
        """Dimension of the vectors."""
        return self._dim

    @property
    def signature(self) -> str:
        """Names the embedding space."""
        return (
            f"hashing-v2:dim={self._dim}:ngrams={','.join(map(str, self._sizes))}:words={self._word_weight}"
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an (n, dim) float32 array of unit rows."""
        n, dim = len(texts), self._dim
        if n == 0:
            return np.zeros((0, dim), dtype=np.float32)
        normalised = [" ".join(t.lower().split()) for t in texts]
        encoded = [f" {t} ".encode() for t in normalised]
        lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=n)
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.uint64)
        ends = np.cumsum(lengths)
        row_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        end_of = np.repeat(ends, lengths)
        rows_parts: list[np.ndarray] = []
        hash_parts: list[np.ndarray] = []
        weight_parts: list[np.ndarray] = []
        # The hash of an (n+1)-gram extends the hash of the n-gram at the same position, so each size
        # costs one pass over the bytes instead of n.
        h = np.zeros(len(data), dtype=np.uint64)
        largest = max(self._sizes)
        for size in range(1, largest + 1):
            m = len(data) - size + 1
            if m <= 0:
                break
            h = h[:m] * _MULT + data[size - 1 : size - 1 + m]
            if size not in self._sizes:
                continue
            valid = np.flatnonzero(np.arange(m) + size <= end_of[:m])
            rows_parts.append(row_of[valid])
            hash_parts.append(_mix(h[valid] ^ np.uint64(size)))
            weight_parts.append(np.ones(len(valid)))
        if self._word_weight:
            words = [(i, w) for i, t in enumerate(normalised) for w in t.split(" ") if w]
            if words:
                rows_parts.append(np.fromiter((i for i, _ in words), dtype=np.int64, count=len(words)))
                crc = np.fromiter(
                    (zlib.crc32(w.encode()) for _, w in words), dtype=np.uint64, count=len(words)
                )
                hash_parts.append(_mix(crc ^ np.uint64(0xA5A5A5A5)))
                weight_parts.append(np.full(len(words), self._word_weight))
        counts: np.ndarray = np.zeros(n * dim, dtype=np.float64)
        if rows_parts:
            hashes = np.concatenate(hash_parts)
            buckets = (hashes % np.uint64(dim)).astype(np.int64)
            signs = np.where((hashes >> np.uint64(63)) == 1, -1.0, 1.0) * np.concatenate(weight_parts)
            counts = np.bincount(np.concatenate(rows_parts) * dim + buckets, weights=signs, minlength=n * dim)
        matrix = counts.reshape(n, dim)
        matrix = np.sign(matrix) * np.log1p(np.abs(matrix))
        return l2_normalize(matrix)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim}, ngram_sizes={self._sizes})"


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (e.g. all-MiniLM-L6-v2); needs the ``embeddings`` extra.

    Args:
        model: A local model directory or a model name already in the local cache (no download is
            attempted when ``HF_HUB_OFFLINE=1``).
        batch_size: Texts per forward pass.
        device: Torch device (``None``: sentence-transformers' choice).
    """

    def __init__(self, model: str, batch_size: int = 64, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise DependencyNotInstalled(
                "sentence-transformers", "embeddings", "SentenceTransformerEmbedder"
            ) from e
        self._name = model
        self._batch_size = batch_size
        self._model = SentenceTransformer(model, device=device)
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = get_dim()
        if dim is None:
            raise ConfigError(f"sentence-transformers model {model!r} does not report an embedding dimension")
        self._dim = int(dim)

    @property
    def dim(self) -> int:
        """Dimension of the vectors."""
        return self._dim

    @property
    def signature(self) -> str:
        """Names the embedding space."""
        return f"sentence-transformers:{os.path.basename(os.path.normpath(self._name))}:dim={self._dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an (n, dim) float32 array of unit rows."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts), batch_size=self._batch_size, convert_to_numpy=True, normalize_embeddings=True
        )
        return l2_normalize(vectors)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint, such as vLLM serving an embedding model.

    The client is created on first use so the embedder stays picklable.

    Args:
        model: The served model name.
        base_url: Endpoint root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: API key (``"EMPTY"`` when the server needs none).
        batch_size: Texts per request.
        timeout_s: Request timeout.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "EMPTY",
        batch_size: int = 256,
        timeout_s: float = 30.0,
    ) -> None:
        self._model = model
        self._base_url = base_url
        self._api_key = api_key
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._client: openai.OpenAI | None = None
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """Dimension of the vectors (asks the server once)."""
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    @property
    def signature(self) -> str:
        """Names the embedding space."""
        return f"openai:{self._model}:dim={self.dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an (n, dim) float32 array of unit rows."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._request(list(texts[i : i + self._batch_size]))
            for i in range(0, len(texts), self._batch_size)
        ]
        out = l2_normalize(np.concatenate(parts))
        self._dim = out.shape[1]
        return out

    def _request(self, batch: list[str]) -> np.ndarray:
        if self._client is None:
            self._client = sync_client(self._base_url, api_key=self._api_key, timeout_s=self._timeout_s)
        # Empty strings are rejected by some servers; a single space embeds to "nothing in particular".
        inputs = [t if t else " " for t in batch]
        with endpoint_errors(
            "The embedding endpoint", self._base_url, model=self._model, api_key=self._api_key
        ):
            response = self._client.embeddings.create(model=self._model, input=inputs)
        data = sorted(response.data, key=lambda d: d.index)
        return np.asarray([d.embedding for d in data], dtype=np.float32)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_client"] = None
        return state


def build_embedder(config: EmbedderConfig) -> Embedder:
    """Build the embedder that ``config`` describes."""
    if config.kind == "hashing":
        return HashingEmbedder(dim=config.dim)
    assert config.model is not None  # guaranteed by EmbedderConfig's validator
    if config.kind == "sentence-transformers":
        return SentenceTransformerEmbedder(config.model, batch_size=config.batch_size)
    base_url = config.base_url or os.environ.get("DREAMGYM_EMBEDDING_BASE_URL")
    if not base_url:
        raise ConfigError(
            "the openai embedder needs an endpoint: set EmbedderConfig(base_url='http://127.0.0.1:8000/v1') "
            "or the DREAMGYM_EMBEDDING_BASE_URL environment variable"
        )
    api_key = os.environ.get(config.api_key_env, "EMPTY")
    return OpenAIEmbedder(
        config.model, base_url, api_key=api_key, batch_size=config.batch_size, timeout_s=config.timeout_s
    )
