"""Rollout workers on Ray: many machines, each stepping a vector env against its own vLLM endpoint(s).

Ray schedules the workers and moves the episodes; vLLM's own data and tensor parallelism serves the model.
Each worker holds one :class:`~dreamgym_env.vector.DreamGymVectorEnv`; endpoints are dealt round-robin
so load spreads over servers. Nothing here is specific to one machine: pass ``address="auto"`` (or a
``ray://`` URL) to join an existing cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dreamgym_env.errors import ConfigError, DependencyNotInstalled
from dreamgym_env.rollout import Episode, Policy, collect_episodes

__all__ = ["RayRolloutPool", "RolloutWorker"]


class RolloutWorker:
    """Holds one vector env; Ray runs it as an actor (it is a plain class, testable without Ray)."""

    def __init__(self, env_id: str, num_envs: int, env_kwargs: dict[str, Any]) -> None:
        import gymnasium as gym

        import dreamgym_env  # noqa: F401 - registers the ids in the worker process

        self.envs = gym.make_vec(env_id, num_envs=num_envs, **env_kwargs)

    def collect(self, policy: Policy, num_episodes: int, seed: int | None = None) -> list[Episode]:
        """Run until ``num_episodes`` episodes have finished."""
        return collect_episodes(self.envs, policy, num_episodes, seed=seed)

    def close(self) -> None:
        """Close the vector env."""
        self.envs.close()


class RayRolloutPool:
    """A pool of Ray actors, each a :class:`RolloutWorker`.

    Args:
        env_id: A registered DreamGym id.
        num_workers: Ray actors to start.
        envs_per_worker: Sub-envs in each worker's vector env.
        endpoints: vLLM base URLs; worker ``i`` uses ``endpoints[i % len(endpoints)]``. ``None`` keeps
            ``env_kwargs``'s ``base_url`` (or ``DREAMGYM_BASE_URL``) for all.
        address: Ray cluster address; ``None`` starts or reuses a local instance.
        num_cpus_per_worker: CPUs Ray reserves per actor (waiting on HTTP needs little).
        **env_kwargs: Passed to ``gymnasium.make_vec`` in each worker (model, top_k, ...).

    Example:
        >>> pool = RayRolloutPool("DreamGym/WebShop-v0", num_workers=8, envs_per_worker=32,
        ...                       endpoints=["http://node1:8000/v1", "http://node2:8000/v1"], model="my-model")
        >>> episodes = pool.collect(policy, episodes_per_worker=64)
    """

    def __init__(
        self,
        env_id: str,
        num_workers: int,
        envs_per_worker: int,
        *,
        endpoints: Sequence[str] | None = None,
        address: str | None = None,
        num_cpus_per_worker: float = 0.5,
        **env_kwargs: Any,
    ) -> None:
        try:
            import ray
        except ImportError as e:
            raise DependencyNotInstalled("ray", "distributed", "Ray rollout workers") from e
        if num_workers < 1:
            raise ConfigError(f"num_workers must be at least 1, got {num_workers}.")
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        actor = ray.remote(num_cpus=num_cpus_per_worker)(RolloutWorker)
        self._ray = ray
        # Ray actor handles: their method calls (``w.collect.remote(...)``) are not typed.
        self.workers: list[Any] = []
        for i in range(num_workers):
            kwargs = dict(env_kwargs)
            if endpoints:
                kwargs["base_url"] = endpoints[i % len(endpoints)]
            self.workers.append(actor.remote(env_id, envs_per_worker, kwargs))

    def collect(self, policy: Policy, episodes_per_worker: int, seed: int | None = None) -> list[Episode]:
        """Collect from every worker in parallel; worker ``i`` is seeded ``seed + 1000 * i``."""
        futures = [
            w.collect.remote(policy, episodes_per_worker, None if seed is None else seed + 1000 * i)
            for i, w in enumerate(self.workers)
        ]
        return [episode for batch in self._ray.get(futures) for episode in batch]

    def close(self) -> None:
        """Close every worker's env and end the actors."""
        self._ray.get([w.close.remote() for w in self.workers])
        for worker in self.workers:
            self._ray.kill(worker)
        self.workers = []
