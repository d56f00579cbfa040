"""Text observations as fixed-size vectors, for policies that read arrays (stable-baselines3's MLPs).

The replay buffer's offline :class:`~dreamgym_env.buffer.embedders.HashingEmbedder` is the default: it
needs no weights, no server and no torch, gives the same vector in every process (so vectorised SB3
workers agree), and is fast enough to sit inside ``step``. Any other
:class:`~dreamgym_env.buffer.embedders.Embedder` (a local sentence-transformers model, an
OpenAI-compatible embeddings endpoint) plugs in unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from dreamgym_env.buffer.embedders import Embedder, HashingEmbedder
from dreamgym_env.errors import ConfigError

EmbeddedField = Literal["observation", "task", "admissible_actions"]
"""What a block of the vector embeds: the observation text, ``info["task"]`` (the instruction, which
later observations of many games no longer repeat), or ``info["admissible_actions"]`` joined (what
can be done here)."""

_FIELDS: tuple[str, ...] = ("observation", "task", "admissible_actions")


class TextEmbedding(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Replace the text observation by its embedding: a ``Box(-1, 1, (len(fields) * dim,), float32)``.

    Each entry of ``fields`` is embedded separately and the unit vectors are concatenated, so the
    task never drowns in a long observation. The original text stays available in
    ``info["text_observation"]`` for logging and for policies that want both.

    ``env.action_masks()`` is the wrapped env's (a :class:`~dreamgym_env.wrappers.DiscreteActions`
    below it gives one), so ``TextEmbedding(DiscreteActions(env))`` is the masked env sb3-contrib's
    ``MaskablePPO`` expects; over an env without masks the attribute is absent, as it is there.

    Args:
        env: An env with text observations and DreamGym's ``info`` keys.
        embedder: Any :class:`~dreamgym_env.buffer.embedders.Embedder`; default
            ``HashingEmbedder(dim=256)``, offline and deterministic.
        fields: Which texts to embed, in order (see :data:`EmbeddedField`); default the observation.

    Example:
        >>> env = TextEmbedding(DiscreteActions(gymnasium.make("DreamGym/TextWorld-Real-v0",
        ...                                                    game_files=games)),
        ...                     fields=("observation", "task"))
        >>> obs, info = env.reset(seed=0)
        >>> obs.shape, obs.dtype          # ((512,), dtype('float32'))
        >>> env.action_masks()            # DiscreteActions' mask: array([ True,  True, False, ...])
    """

    def __init__(
        self,
        env: gym.Env[str, Any],
        embedder: Embedder | None = None,
        fields: Sequence[EmbeddedField] = ("observation",),
    ) -> None:
        if isinstance(env, VectorEnv):
            raise ConfigError(
                "TextEmbedding wraps one env; for a vector env (gymnasium.make_vec) use "
                "dreamgym_env.wrappers.VectorTextEmbedding(envs, embedder, fields), which embeds the "
                "whole batch in one call."
            )
        fields = check_fields(fields)
        gym.utils.RecordConstructorArgs.__init__(self, embedder=embedder, fields=fields)
        super().__init__(env)
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder(dim=256)
        self.fields = fields
        self.observation_space = embedding_space(self.embedder, fields)

    @property
    def action_masks(self) -> Callable[[], np.ndarray]:
        """The wrapped env's ``action_masks`` method (e.g. :meth:`DiscreteActions.action_masks`).

        Raises:
            AttributeError: No env below this wrapper has masks (wrap it in ``DiscreteActions`` first).
        """
        try:
            masks: Callable[[], np.ndarray] = self.env.get_wrapper_attr("action_masks")
        except AttributeError:
            raise AttributeError(
                "TextEmbedding has no action_masks: the env it wraps has none. Wrap the env in "
                "DiscreteActions first: TextEmbedding(DiscreteActions(env))."
            ) from None
        return masks

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the env and embed the first observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self._embed(obs, info), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Step the env and embed the next observation."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._embed(obs, info), float(reward), terminated, truncated, info

    def _embed(self, observation: str, info: dict[str, Any]) -> np.ndarray:
        return _embed_observations(self.embedder, self.fields, [observation], [info])[0]


def check_fields(fields: Sequence[str]) -> tuple[EmbeddedField, ...]:
    """Validate ``fields`` (see :data:`EmbeddedField`) and return them as a tuple."""
    fields = tuple(fields)
    unknown = [f for f in fields if f not in _FIELDS]
    if not fields or unknown:
        raise ConfigError(f"fields must be a non-empty sequence of {list(_FIELDS)}, got {list(fields)}.")
    return fields  # type: ignore[return-value]


def embedding_space(embedder: Embedder, fields: Sequence[EmbeddedField]) -> spaces.Box:
    """``Box(-1, 1, (len(fields) * dim,), float32)``, the space of :func:`_embed_observations` rows."""
    # Rows are unit vectors (or zero for empty text), so every coordinate lies within [-1, 1].
    return spaces.Box(-1.0, 1.0, shape=(len(fields) * embedder.dim,), dtype=np.float32)


def _embed_observations(
    embedder: Embedder,
    fields: Sequence[EmbeddedField],
    observations: Sequence[str],
    infos: Sequence[dict[str, Any]],
) -> np.ndarray:
    """Embed N observations in one ``embedder.embed`` call: an ``(N, len(fields) * dim)`` float32 array.

    Row ``i`` concatenates the unit vectors of ``fields`` read from ``observations[i]`` and
    ``infos[i]``; each info gets ``info["text_observation"]``, the text that was embedded.
    """
    texts: list[str] = []
    for observation, info in zip(observations, infos, strict=True):
        info["text_observation"] = observation
        texts.extend(_text(name, observation, info) for name in fields)
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    return np.clip(vectors.reshape(len(observations), len(fields) * embedder.dim), -1.0, 1.0)


def _text(name: str, observation: str, info: dict[str, Any]) -> str:
    if name == "observation":
        return observation
    if name == "task":
        return str(info.get("task", ""))
    return "\n".join(str(a) for a in info.get("admissible_actions") or [])
