"""Vector versions of :class:`DiscreteActions` and :class:`TextEmbedding`, for Gymnasium vector envs.

Libraries that step a Gymnasium ``VectorEnv`` themselves (CleanRL-style loops, RLlib's env runners,
Gymnasium's own vector wrappers) get the native :class:`~dreamgym_env.vector.DreamGymVectorEnv`'s
concurrency only if the adapters wrap the batch rather than each sub-env (``gymnasium.make_vec``
refuses per-sub-env ``wrappers=`` for a vector entry point). These apply the single-env rules to all
sub-envs at once: the same indices, masks, invalid-index policy and features, and one ``embed`` call
per step for the whole batch. Every autoreset mode is supported; in ``SAME_STEP`` the last
observation of an ended episode (``info["final_obs"]``) is embedded too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from dreamgym_env.buffer.embedders import Embedder, HashingEmbedder
from dreamgym_env.errors import ConfigError, DreamGymError
from dreamgym_env.wrappers.discrete_actions import (
    InvalidIndexPolicy,
    action_mask,
    check_discrete_config,
    check_skip_verbs,
    index_to_action,
    offered_actions,
)
from dreamgym_env.wrappers.text_embedding import EmbeddedField, check_fields, embedding_space


class VectorDiscreteActions(VectorWrapper):
    """:class:`~dreamgym_env.wrappers.DiscreteActions` for a vector env: ``MultiDiscrete([K] * N)``.

    Index ``a[j]`` plays the ``a[j]``-th admissible action of sub-env ``j``'s current state, with
    ``DiscreteActions``'s ``max_actions`` and ``on_invalid`` rules. :meth:`action_masks` gives the
    ``(N, K)`` masks, and every ``reset``/``step`` adds ``infos["action_mask"]`` (``(N, K)``),
    ``infos["actions_dropped"]`` and, after a step, ``infos["action_text"]`` (the strings played) and
    ``infos["last_action_error"]`` naming an index without an action behind it. A sub-env that the
    step only resets (``NEXT_STEP`` autoreset) plays nothing and reports no error.

    Args:
        env: A Gymnasium vector env of DreamGym envs (``gymnasium.make_vec("DreamGym/...")``, or a
            ``SyncVectorEnv`` of real ones) whose infos carry ``admissible_actions``.
        max_actions: ``K``, the size of each sub-env's discrete space.
        on_invalid: ``"fail"`` or ``"wrap"``, as for ``DiscreteActions``.
        skip_verbs: first words of commands the policy is not offered, as for ``DiscreteActions``.

    Example:
        >>> envs = VectorDiscreteActions(gymnasium.make_vec("DreamGym/TextWorld-v0", num_envs=8), 16)
        >>> obs, infos = envs.reset(seed=0)
        >>> obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
    """

    def __init__(
        self,
        env: VectorEnv,
        max_actions: int = 32,
        on_invalid: InvalidIndexPolicy = "fail",
        *,
        skip_verbs: Sequence[str] = (),
    ) -> None:
        check_discrete_config(max_actions, on_invalid, _domain(env))
        super().__init__(env)
        self.max_actions = max_actions
        self.on_invalid: InvalidIndexPolicy = on_invalid
        self.skip_verbs = check_skip_verbs(skip_verbs)
        self.single_action_space = spaces.Discrete(max_actions)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._actions: list[list[str]] = [[] for _ in range(self.num_envs)]
        self._resetting = np.zeros(self.num_envs, dtype=np.bool_)

    @property
    def actions(self) -> list[list[str]]:
        """Each sub-env's admissible actions that indices ``0..K-1`` stand for."""
        return [list(a) for a in self._actions]

    def action_masks(self) -> np.ndarray:
        """The ``(N, K)`` boolean masks of the sub-envs' current states (never an all-False row)."""
        return np.stack([action_mask(len(a), self.max_actions) for a in self._actions])

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the vector env and read the sub-envs' first admissible actions."""
        obs, infos = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        if "admissible_actions" not in infos:
            raise DreamGymError(
                "VectorDiscreteActions wraps DreamGym envs, whose infos carry 'admissible_actions'; this "
                f"vector env's reset infos have only {sorted(infos)}."
            )
        mask = (options or {}).get("reset_mask")
        if mask is None:
            self._resetting[:] = False
        else:
            self._resetting &= ~np.asarray(mask, dtype=np.bool_)
        return obs, self._observe(infos)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Play each sub-env's admissible action at its index (see the class docstring for others)."""
        indices = np.asarray(actions).reshape(-1)
        if len(indices) != self.num_envs:
            raise ConfigError(f"Got {len(indices)} actions for {self.num_envs} envs.")
        played = [
            ("", None)
            if self._resetting[j]
            else index_to_action(self._actions[j], int(index), self.on_invalid)
            for j, index in enumerate(indices)
        ]
        obs, rewards, terminations, truncations, infos = self.env.step([text for text, _ in played])
        # In SAME_STEP mode an ended sub-env's step info is ``final_info`` (the top level is the reset's).
        ended_here = np.asarray(infos.get("_final_info", np.zeros(self.num_envs, dtype=np.bool_)))
        _annotate(infos, ~self._resetting & ~ended_here, played)
        if ended_here.any():
            _annotate(infos["final_info"], ended_here, played)
            self._describe_final(infos["final_info"], ended_here)
        if self.env.metadata.get("autoreset_mode") is AutoresetMode.NEXT_STEP:
            self._resetting = np.logical_or(terminations, truncations)
        return obs, rewards, terminations, truncations, self._observe(infos)

    def _describe_final(self, final_info: dict[str, Any], ended: np.ndarray) -> None:
        """Masks and drop counts of the ended episodes' last states, as ``DiscreteActions`` gives them."""
        listed = final_info.get("admissible_actions")
        masks = np.zeros((self.num_envs, self.max_actions), dtype=np.bool_)
        dropped = np.zeros(self.num_envs, dtype=np.int64)
        for j in np.flatnonzero(ended):
            actions = offered_actions((listed[j] if listed is not None else None) or [], self.skip_verbs)
            masks[j] = action_mask(min(len(actions), self.max_actions), self.max_actions)
            dropped[j] = max(0, len(actions) - self.max_actions)
        final_info["action_mask"], final_info["_action_mask"] = masks, ended.copy()
        final_info["actions_dropped"], final_info["_actions_dropped"] = dropped, ended.copy()

    def _observe(self, infos: dict[str, Any]) -> dict[str, Any]:
        """Read the admissible actions of the sub-envs ``infos`` reports on; add masks and drop counts."""
        listed = infos.get("admissible_actions")
        present = infos.get("_admissible_actions", np.ones(self.num_envs, dtype=np.bool_))
        dropped = np.zeros(self.num_envs, dtype=np.int64)
        for j in range(self.num_envs):
            if listed is not None and present[j]:
                actions = offered_actions(listed[j] or [], self.skip_verbs)
                self._actions[j] = actions[: self.max_actions]
                dropped[j] = len(actions) - len(self._actions[j])
        infos["action_mask"] = self.action_masks()
        infos["_action_mask"] = np.ones(self.num_envs, dtype=np.bool_)
        infos["actions_dropped"] = dropped
        infos["_actions_dropped"] = np.asarray(present, dtype=np.bool_).copy()
        return infos


def _annotate(infos: dict[str, Any], rows: np.ndarray, played: list[tuple[str, str | None]]) -> None:
    """Add ``action_text`` (and ``last_action_error`` for indices without an action) for ``rows``."""
    n = len(played)
    infos["action_text"] = np.array([text for text, _ in played], dtype=object)
    infos["_action_text"] = rows.copy()
    failed = rows & np.array([error is not None for _, error in played], dtype=np.bool_)
    if failed.any():
        errors = infos.get("last_action_error", np.full(n, None, dtype=object)).astype(object)
        present = np.asarray(infos.get("_last_action_error", np.zeros(n, dtype=np.bool_)))
        for j in np.flatnonzero(failed):
            errors[j] = played[j][1]
        infos["last_action_error"] = errors
        infos["_last_action_error"] = present | failed


class VectorTextEmbedding(VectorWrapper):
    """:class:`~dreamgym_env.wrappers.TextEmbedding` for a vector env: ``Box(-1, 1, (N, F * dim))``.

    Row ``j`` is what ``TextEmbedding`` gives sub-env ``j`` with the same ``embedder`` and
    ``fields``; all rows (and, in ``SAME_STEP`` mode, the ``final_obs`` of ended episodes) are
    embedded in one ``embedder.embed`` call per step. ``infos["text_observation"]`` keeps the texts.
    ``envs.action_masks()`` is the ``(N, K)`` masks of a :class:`VectorDiscreteActions` below it.

    Args:
        env: A Gymnasium vector env with text observations and DreamGym's ``info`` keys.
        embedder: Any :class:`~dreamgym_env.buffer.embedders.Embedder`; default
            ``HashingEmbedder(dim=256)``.
        fields: Which texts to embed, in order (see :data:`~dreamgym_env.wrappers.EmbeddedField`).

    Example:
        >>> envs = VectorTextEmbedding(
        ...     VectorDiscreteActions(gymnasium.make_vec("DreamGym/TextWorld-v0", num_envs=8), 16),
        ...     fields=("observation", "task"),
        ... )
        >>> obs, infos = envs.reset(seed=0)
        >>> obs.shape                      # (8, 512)
    """

    def __init__(
        self,
        env: VectorEnv,
        embedder: Embedder | None = None,
        fields: Sequence[EmbeddedField] = ("observation",),
    ) -> None:
        self.fields = check_fields(fields)
        super().__init__(env)
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder(dim=256)
        self.single_observation_space = embedding_space(self.embedder, self.fields)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        # Each sub-env's last task and actions: a partial reset reports infos for the reset ones only.
        self._context: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]

    @property
    def action_masks(self) -> Callable[[], np.ndarray]:
        """The ``action_masks`` method of the wrapped vector env (e.g. :class:`VectorDiscreteActions`).

        Raises:
            AttributeError: No vector env below this wrapper has masks.
        """
        env: Any = self.env
        while env is not None:
            if hasattr(env, "action_masks"):
                masks: Callable[[], np.ndarray] = env.action_masks
                return masks
            env = getattr(env, "env", None)
        raise AttributeError(
            "VectorTextEmbedding has no action_masks: the vector env it wraps has none. Wrap it in "
            "VectorDiscreteActions first: VectorTextEmbedding(VectorDiscreteActions(envs))."
        )

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the vector env and embed the first observations."""
        obs, infos = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        return self._embed(obs, infos), infos

    def step(self, actions: Any) -> tuple[np.ndarray, Any, Any, Any, dict[str, Any]]:
        """Step the vector env and embed the observations (and ``final_obs``) in one call."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        return self._embed(obs, infos), rewards, terminations, truncations, infos

    def _embed(self, observations: Sequence[str], infos: dict[str, Any]) -> np.ndarray:
        for j, context in enumerate(self._context):
            context.update(_row(infos, j))
        texts = [self._texts(str(o), self._context[j]) for j, o in enumerate(observations)]
        finals = infos.get("final_obs")
        ended = [j for j in range(self.num_envs) if finals is not None and infos["_final_obs"][j]]
        final_info = infos.get("final_info", {})
        texts += [self._texts(str(finals[j]), _row(final_info, j)) for j in ended]  # type: ignore[index]
        flat = [t for row in texts for t in row]
        width = len(self.fields) * self.embedder.dim
        vectors = np.clip(np.asarray(self.embedder.embed(flat), dtype=np.float32), -1.0, 1.0)
        vectors = vectors.reshape(len(texts), width)
        infos["text_observation"] = np.array([str(o) for o in observations], dtype=object)
        infos["_text_observation"] = np.ones(self.num_envs, dtype=np.bool_)
        if ended:
            embedded = np.full(self.num_envs, None, dtype=object)
            for row, j in enumerate(ended, start=self.num_envs):
                embedded[j] = vectors[row]
            final_info["text_observation"] = finals
            final_info["_text_observation"] = infos["_final_obs"]
            infos["final_obs"] = embedded
        return vectors[: self.num_envs]

    def _texts(self, observation: str, context: dict[str, Any]) -> list[str]:
        texts = []
        for name in self.fields:
            if name == "observation":
                texts.append(observation)
            elif name == "task":
                texts.append(str(context.get("task", "")))
            else:
                texts.append("\n".join(str(a) for a in context.get("admissible_actions") or []))
        return texts


def _row(infos: dict[str, Any], j: int) -> dict[str, Any]:
    """Sub-env ``j``'s ``task`` and ``admissible_actions`` in a batched info dict, where it has them."""
    row: dict[str, Any] = {}
    for key in ("task", "admissible_actions"):
        present = infos.get(f"_{key}")
        if key in infos and (present is None or present[j]):
            row[key] = infos[key][j]
    return row


def _domain(env: VectorEnv) -> Any:
    """The DreamGym domain of a vector env's sub-envs, where it can be found (else ``None``)."""
    sub_envs = getattr(env.unwrapped, "envs", None)
    return getattr(sub_envs[0].unwrapped, "domain", None) if sub_envs else None
