"""DreamGym ids in RLlib's env registry, as envs its default models can read.

RLlib builds its env runners' envs from ``config.environment(name, env_config=...)``. A plain
Gymnasium id would reach the text observation space, which RLlib's default models do not take; and
an env creator registered with ``ray.tune.register_env`` is the one place RLlib lets a user wrap
the env. :func:`register_rllib_envs` registers, under each DreamGym id, a creator that builds the
env from ``env_config`` and applies :class:`DiscreteActions` and :class:`TextEmbedding` (or their
vector versions), so a training script names the id and nothing else.

With ``config.env_runners(gym_env_vectorize_mode="vector_entry_point")`` RLlib asks the creator for
the whole batch (``env_config["num_envs"]``) and gets the native
:class:`~dreamgym_env.vector.DreamGymVectorEnv`, whose sub-envs' model requests are in flight at
once; the default ``"sync"`` mode builds one env per slot and steps them one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import gymnasium as gym

from dreamgym_env.errors import ConfigError, DependencyNotInstalled
from dreamgym_env.wrappers.discrete_actions import DiscreteActions
from dreamgym_env.wrappers.text_embedding import TextEmbedding
from dreamgym_env.wrappers.vector import VectorDiscreteActions, VectorTextEmbedding

__all__ = ["register_rllib_envs"]

_ADAPTER_KEYS: tuple[str, ...] = ("max_actions", "on_invalid", "embedder", "fields")
"""``env_config`` keys that configure the adapters instead of the env (``DiscreteActions``'s
``max_actions`` and ``on_invalid``, ``TextEmbedding``'s ``embedder`` and ``fields``)."""


def _make_rllib_env(env_id: str, env_config: Mapping[str, Any]) -> gym.Env[Any, Any] | gym.vector.VectorEnv:
    """The env RLlib's creator for ``env_id`` returns for ``env_config``.

    ``env_config`` holds the env's keyword arguments (``backend``, ``base_url``, ``model``,
    ``max_steps``...), the :data:`_ADAPTER_KEYS`, and, when RLlib asks for a batch, ``num_envs``:
    then the result is ``gymnasium.make_vec(env_id, num_envs, ...)`` (the native vector env for a
    simulated id, a ``SyncVectorEnv`` for a real one) under the vector adapters, in Gymnasium's
    default ``NEXT_STEP`` autoreset mode, which RLlib's env runners expect.
    """
    kwargs = dict(env_config)
    adapters = {key: kwargs.pop(key) for key in _ADAPTER_KEYS if key in kwargs}
    discrete = {k: adapters[k] for k in ("max_actions", "on_invalid") if k in adapters}
    embedding = {k: adapters[k] for k in ("embedder", "fields") if k in adapters}
    num_envs = kwargs.pop("num_envs", None)
    if num_envs is None:
        return TextEmbedding(DiscreteActions(gym.make(env_id, **kwargs), **discrete), **embedding)
    mode = None if gym.spec(env_id).vector_entry_point is not None else "sync"
    envs = gym.make_vec(env_id, int(num_envs), vectorization_mode=mode, **kwargs)
    return VectorTextEmbedding(VectorDiscreteActions(envs, **discrete), **embedding)


def register_rllib_envs(env_ids: Iterable[str] | None = None) -> list[str]:
    """Register DreamGym ids with RLlib (``ray.tune.register_env``), adapted for its default models.

    After this, ``PPOConfig().environment("DreamGym/TextWorld-v0", env_config={...})`` trains on the
    id: observations are ``TextEmbedding`` vectors, actions ``Discrete(max_actions)`` indices into the
    admissible actions (see :func:`_make_rllib_env` for ``env_config``).

    Args:
        env_ids: The ids to register; default every simulated and real DreamGym id.

    Returns:
        The registered ids.

    Raises:
        DependencyNotInstalled: ray's RLlib is not installed.
        ConfigError: An id is not a registered Gymnasium id.
    """
    try:
        from ray.tune.registry import register_env
    except ImportError as e:
        raise DependencyNotInstalled("ray[rllib]", "rllib", "register_rllib_envs") from e
    from dreamgym_env.real import REAL_IDS
    from dreamgym_env.registration import BUILTIN_IDS

    ids = list(env_ids) if env_ids is not None else [*BUILTIN_IDS, *REAL_IDS]
    unknown = [env_id for env_id in ids if env_id not in gym.registry]
    if unknown:
        raise ConfigError(
            f"Not registered Gymnasium ids: {unknown}; DreamGym ids: {sorted([*BUILTIN_IDS, *REAL_IDS])}."
        )
    for env_id in ids:
        register_env(env_id, _creator(env_id))
    return ids


def _creator(env_id: str) -> Callable[[Mapping[str, Any]], Any]:
    def create(env_config: Mapping[str, Any]) -> Any:
        return _make_rllib_env(env_id, env_config)

    return create
