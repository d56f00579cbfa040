"""A stable-baselines3 ``VecEnv`` over a Gymnasium vector env of DreamGym envs, for concurrent rollouts.

SB3's ``DummyVecEnv`` steps its envs one after another, so N simulated envs cost N model round trips
per step. :class:`SB3VecEnv` wraps the native :class:`~dreamgym_env.vector.DreamGymVectorEnv` instead:
one SB3 step is one vector step, with all N model requests in flight at once (vLLM batches them). It
applies what :class:`~dreamgym_env.wrappers.DiscreteActions` and
:class:`~dreamgym_env.wrappers.TextEmbedding` do to a single env, once per batch, so a policy trained
through either path sees the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from dreamgym_env.buffer.embedders import Embedder
from dreamgym_env.errors import ConfigError, DependencyNotInstalled, DreamGymError
from dreamgym_env.rollout import unbatch_infos
from dreamgym_env.wrappers.discrete_actions import InvalidIndexPolicy, action_mask
from dreamgym_env.wrappers.text_embedding import EmbeddedField
from dreamgym_env.wrappers.vector import VectorDiscreteActions, VectorTextEmbedding

try:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import is_wrapped
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise DependencyNotInstalled("stable-baselines3", "sb3", "SB3VecEnv") from e

__all__ = ["AnsweredByCounter", "SB3VecEnv"]

_MASKS = "action_masks"


class SB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` over a Gymnasium vector env: ``Discrete(K)`` actions, masks, embedded observations.

    Every sub-env's observation is embedded in one ``embedder.embed`` call per step (the same features
    as :class:`~dreamgym_env.wrappers.TextEmbedding` with the same ``embedder`` and ``fields``), and
    action ``i`` of sub-env ``j`` plays the ``i``-th of its current ``info["admissible_actions"]``, with
    :class:`~dreamgym_env.wrappers.DiscreteActions`'s ``max_actions`` and ``on_invalid`` rules.
    ``env_method("action_masks")`` gives the N masks (sb3-contrib's ``MaskablePPO`` calls it), and
    :meth:`action_masks` the ``(N, K)`` array.

    The vector env must autoreset in ``SAME_STEP`` mode, which is SB3's convention: when an episode
    ends, the returned observation is the next episode's first, ``infos[j]["terminal_observation"]``
    is the embedded last observation, ``infos[j]["TimeLimit.truncated"]`` tells truncation from
    termination, ``infos[j]`` is the final step's info and ``reset_infos[j]`` the new episode's.
    :meth:`make` and :meth:`from_env_fns` build such a vector env.

    Infos carry what the single-env wrappers add: ``action_text``, ``action_mask``,
    ``actions_dropped``, ``text_observation`` and, for an index without an action,
    ``last_action_error``. Attributes and methods other than ``action_masks`` (``get_attr``,
    ``set_attr``, ``env_method``, ``env_is_wrapped``) reach the sub-envs through the vector env's
    ``envs`` list (``DreamGymVectorEnv`` and ``SyncVectorEnv`` have one).

    Args:
        venv: A Gymnasium vector env with text observations and DreamGym's ``info`` keys, in
            ``SAME_STEP`` autoreset mode: ``DreamGymVectorEnv(..., autoreset_mode="SameStep")``, or a
            ``SyncVectorEnv`` of real envs.
        max_actions: ``K``, the size of the discrete action space.
        on_invalid: ``"fail"`` or ``"wrap"``, as for ``DiscreteActions``.
        embedder: Any :class:`~dreamgym_env.buffer.embedders.Embedder`; default
            ``HashingEmbedder(dim=256)``.
        fields: Which texts to embed, as for ``TextEmbedding``.
        skip_verbs: First words of commands the policy is not offered, as for ``DiscreteActions``.

    Example:
        >>> envs = SB3VecEnv.make("DreamGym/TextWorld-v0", num_envs=16, max_actions=16,
        ...                       fields=("observation", "task"), base_url=url, model=name)
        >>> model = MaskablePPO("MlpPolicy", envs).learn(10_000)
        >>> real = SB3VecEnv.make("DreamGym/TextWorld-Real-v0", num_envs=4, max_actions=16,
        ...                       fields=("observation", "task"), game_files=games)
    """

    def __init__(
        self,
        venv: VectorEnv,
        max_actions: int = 32,
        on_invalid: InvalidIndexPolicy = "fail",
        embedder: Embedder | None = None,
        fields: Sequence[EmbeddedField] = ("observation",),
        *,
        skip_verbs: Sequence[str] = (),
    ) -> None:
        mode = venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if AutoresetMode(mode) is not AutoresetMode.SAME_STEP:
            raise ConfigError(
                f"SB3VecEnv needs a vector env in SAME_STEP autoreset mode (SB3's convention), got {mode}. "
                "Build it with autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP, or use "
                "SB3VecEnv.make(env_id, num_envs) / SB3VecEnv.from_env_fns(env_fns)."
            )
        self.venv = venv
        # The batch goes through the vector wrappers, which own the rules; this class only speaks SB3.
        self._discrete = VectorDiscreteActions(venv, max_actions, on_invalid, skip_verbs=skip_verbs)
        self._stack = VectorTextEmbedding(self._discrete, embedder, fields)
        self.max_actions = max_actions
        self.on_invalid: InvalidIndexPolicy = on_invalid
        self.embedder: Embedder = self._stack.embedder
        self.fields = self._stack.fields
        self._pending: np.ndarray | None = None
        super().__init__(venv.num_envs, self._stack.single_observation_space, spaces.Discrete(max_actions))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def make(
        cls,
        env_id: str,
        num_envs: int = 1,
        *,
        max_actions: int = 32,
        on_invalid: InvalidIndexPolicy = "fail",
        embedder: Embedder | None = None,
        fields: Sequence[EmbeddedField] = ("observation",),
        skip_verbs: Sequence[str] = (),
        **env_kwargs: Any,
    ) -> SB3VecEnv:
        """``gymnasium.make_vec(env_id, num_envs, **env_kwargs)`` in ``SAME_STEP`` mode, wrapped.

        A simulated id gets the native concurrent ``DreamGymVectorEnv``; an id without a vector entry
        point (the real envs) a ``SyncVectorEnv`` of ``gymnasium.make(env_id, **env_kwargs)``. So one
        training script runs in the simulator or in the real env by changing ``env_id`` only.
        """
        if gym.spec(env_id).vector_entry_point is not None:
            venv = gym.make_vec(env_id, num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **env_kwargs)
        else:
            venv = gym.make_vec(
                env_id,
                num_envs,
                vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                **env_kwargs,
            )
        return cls(venv, max_actions, on_invalid, embedder, fields, skip_verbs=skip_verbs)

    @classmethod
    def from_env_fns(
        cls,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        *,
        max_actions: int = 32,
        on_invalid: InvalidIndexPolicy = "fail",
        embedder: Embedder | None = None,
        fields: Sequence[EmbeddedField] = ("observation",),
        skip_verbs: Sequence[str] = (),
    ) -> SB3VecEnv:
        """Wrap a ``SyncVectorEnv`` (``SAME_STEP``) of the envs ``env_fns`` make, e.g. real envs.

        The sub-envs step one after another, like ``DummyVecEnv``; only simulated envs through
        ``DreamGymVectorEnv`` step concurrently.
        """
        venv = SyncVectorEnv(list(env_fns), autoreset_mode=AutoresetMode.SAME_STEP)
        return cls(venv, max_actions, on_invalid, embedder, fields, skip_verbs=skip_verbs)

    # ------------------------------------------------------------------ VecEnv API
    def reset(self) -> np.ndarray:
        """Reset every sub-env with the seeds of :meth:`seed` and the options of ``set_options``."""
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        options = self._options[0] if self._options else {}
        if any(o != options for o in self._options):
            raise ConfigError(
                "SB3VecEnv passes one options dict to the vector env's reset, but set_options gave "
                f"different options per env: {self._options}. Set the same options for every env."
            )
        # Sync, Async and DreamGym vector envs take one seed per sub-env (the base class types an int).
        obs, batched = self._stack.reset(seed=seeds, options=options or None)  # type: ignore[arg-type]
        self.reset_infos = unbatch_infos(batched, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Keep the N action indices for :meth:`step_wait`."""
        indices = np.asarray(actions).reshape(-1)
        if len(indices) != self.num_envs:
            raise ConfigError(f"Got {len(indices)} actions for {self.num_envs} envs.")
        self._pending = indices

    def step_wait(self) -> VecEnvStepReturn:
        """One vector step (concurrent for ``DreamGymVectorEnv``), in SB3's form.

        An ended sub-env's info is its final step's (``final_info``), with the embedded last
        observation as ``terminal_observation`` and ``TimeLimit.truncated``; the new episode's goes to
        ``reset_infos``.
        """
        if self._pending is None:
            raise DreamGymError("step_wait() needs a step_async(actions) first.")
        indices, self._pending = self._pending, None
        obs, rewards, terminations, truncations, batched = self._stack.step(indices)
        dones = np.logical_or(terminations, truncations)
        step_infos: list[dict[str, Any]] = []
        for i, info in enumerate(unbatch_infos(batched, self.num_envs)):
            if dones[i]:
                terminal, step_info = info.pop("final_obs"), info.pop("final_info")
                step_info["terminal_observation"] = terminal
                self.reset_infos[i] = info
            else:
                step_info = info
            step_info["TimeLimit.truncated"] = bool(truncations[i] and not terminations[i])
            step_infos.append(step_info)
        return obs, np.asarray(rewards, dtype=np.float32), dones, step_infos

    def action_masks(self) -> np.ndarray:
        """The ``(N, K)`` boolean masks of the sub-envs' current states (never an all-False row)."""
        return self._discrete.action_masks()

    def actions(self, index: int) -> list[str]:
        """The admissible actions of sub-env ``index`` that indices ``0..K-1`` stand for."""
        return self._discrete.actions[index]

    def close(self) -> None:
        """Close the vector env (and, if it created it, the shared backend)."""
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """``action_masks`` gives each sub-env's mask function; other names are read on the sub-envs."""
        if attr_name == _MASKS:
            return [
                lambda i=i: action_mask(len(self._discrete.actions[i]), self.max_actions)
                for i in self._get_indices(indices)
            ]
        return [env.get_wrapper_attr(attr_name) for env in self._targets(indices, attr_name)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` on the sub-envs ``indices``."""
        for env in self._targets(indices, attr_name):
            env.set_wrapper_attr(attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """``action_masks`` gives the N masks; other methods are called on the sub-envs."""
        if method_name == _MASKS:
            return [fn() for fn in self.get_attr(_MASKS, indices)]
        return [
            env.get_wrapper_attr(method_name)(*method_args, **method_kwargs)
            for env in self._targets(indices, method_name)
        ]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Whether each sub-env is wrapped by ``wrapper_class`` (the SB3 adapters here wrap the batch)."""
        return [is_wrapped(env, wrapper_class) for env in self._targets(indices, wrapper_class.__name__)]

    def _targets(self, indices: VecEnvIndices, name: str) -> list[gym.Env[Any, Any]]:
        envs = getattr(self.venv, "envs", None)
        if envs is None:
            raise AttributeError(
                f"SB3VecEnv reaches sub-envs through the vector env's 'envs' list, which "
                f"{type(self.venv).__name__} lacks; cannot look up {name!r}."
            )
        return [envs[i] for i in self._get_indices(indices)]


class AnsweredByCounter(BaseCallback):
    """Counts who answered each simulated step of a training run (``info["answered_by"]``).

    ``model``, ``chosen``, ``memo``, ``replay``, ``rule``...: a claim about the experience model rests on
    the steps it answered, so a training run reports them. Pass it to ``learn(callback=...)``; read
    :attr:`counts` after, and :attr:`rollouts` for each rollout's own counts (as the policy learns,
    it asks for other steps). Steps of real envs carry no ``answered_by`` and are not counted.
    """

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}
        self.rollouts: list[dict[str, int]] = []
        self._rollout: dict[str, int] = {}

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", ()):
            who = info.get("answered_by")
            if who is not None:
                self.counts[str(who)] = self.counts.get(str(who), 0) + 1
                self._rollout[str(who)] = self._rollout.get(str(who), 0) + 1
        return True

    def _on_rollout_end(self) -> None:
        self.rollouts.append(dict(sorted(self._rollout.items())))
        self._rollout = {}
