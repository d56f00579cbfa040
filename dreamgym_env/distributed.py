"""Rollout workers on Ray: many machines, each stepping a vector env against its own vLLM endpoint(s).

Ray schedules the workers and moves the episodes; vLLM's own data and tensor parallelism serves the model.
Each worker holds one :class:`~dreamgym_env.vector.DreamGymVectorEnv`; endpoints are dealt round-robin
so load spreads over servers. Nothing here is specific to one machine: pass ``address="auto"`` (or a
``ray://`` URL) to join an existing cluster.

With ``buffer=`` and ``task_pool=`` every worker opens the same replay buffer and curriculum task pool
by location. A ``postgresql://`` URL is one store for the whole cluster: a transition one worker
writes is retrieved by every other worker after its next catch-up (each retrieval checks for other
writers' commits), and the curriculum's statistics are recomputed from every worker's outcomes before
each :meth:`RayRolloutPool.collect`. A SQLite file works only while all workers share one machine.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dreamgym_env.errors import ConfigError, DependencyNotInstalled
from dreamgym_env.records import Transition
from dreamgym_env.rollout import Episode, Policy, collect_episodes
from dreamgym_env.storage.urls import is_postgres_url, redact

if TYPE_CHECKING:
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.curriculum.sampler import CurriculumSampler

__all__ = ["RayRolloutPool", "RolloutWorker"]

logger = logging.getLogger(__name__)


def _check_shared(name: str, location: str | None, address: str | None) -> None:
    if location is None:
        return
    if location == ":memory:":
        raise ConfigError(
            f"{name}=':memory:' would give every worker its own empty store; give a postgresql:// URL "
            "(one store for the cluster) or a SQLite file (workers on one machine)"
        )
    if address is not None and not is_postgres_url(location):
        logger.warning(
            "%s=%s is a SQLite file: workers on other machines cannot share it; use a postgresql:// URL",
            name,
            redact(location),
        )


class RolloutWorker:
    """Holds one vector env; Ray runs it as an actor (it is a plain class, testable without Ray).

    Args:
        env_id: A registered DreamGym id.
        num_envs: Sub-envs of the vector env.
        env_kwargs: Passed to ``gymnasium.make_vec``.
        buffer: Location of the replay buffer the sub-envs retrieve from and write to (a
            ``postgresql://`` URL to share it across machines); ``None``: as ``env_kwargs`` says.
        task_pool: Location of the curriculum task pool the sub-envs sample tasks from and record
            outcomes into; ``None``: as ``env_kwargs`` says.
        buffer_kwargs: ``BufferConfig`` fields for opening ``buffer`` (``k``, ``max_synthetic``, ...).
        curriculum_kwargs: ``CurriculumSampler`` keyword arguments (``group_n``, ``seeds``, ...).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        env_kwargs: dict[str, Any],
        *,
        buffer: str | None = None,
        task_pool: str | None = None,
        buffer_kwargs: Mapping[str, Any] | None = None,
        curriculum_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        import gymnasium as gym

        import dreamgym_env  # noqa: F401 - registers the ids in the worker process

        kwargs = dict(env_kwargs)
        self.buffer: ReplayBuffer | None = None
        self.sampler: CurriculumSampler | None = None
        if buffer is not None:
            if "retriever" in kwargs:
                raise ConfigError("give either buffer=<location> or retriever=..., not both")
            from dreamgym_env.buffer import ReplayBuffer

            self.buffer = ReplayBuffer.open(buffer, **dict(buffer_kwargs or {}))
            kwargs["retriever"] = self.buffer
        if task_pool is not None:
            if "tasks" in kwargs:
                raise ConfigError("give either task_pool=<location> or tasks=..., not both")
            from dreamgym_env.curriculum.sampler import CurriculumSampler

            domain = kwargs.get("domain") or gym.spec(env_id).kwargs.get("domain")
            if domain is None:
                raise ConfigError(f"{env_id} names no domain; pass domain=... for the curriculum")
            self.sampler = CurriculumSampler(task_pool, domain, **dict(curriculum_kwargs or {}))
            kwargs["tasks"] = self.sampler
        self.envs = gym.make_vec(env_id, num_envs=num_envs, **kwargs)

    def collect(self, policy: Policy, num_episodes: int, seed: int | None = None) -> list[Episode]:
        """Run until ``num_episodes`` episodes have finished (after reloading the shared task pool)."""
        if self.sampler is not None:
            self.sampler.refresh()  # every worker's outcomes so far, not only this one's
        return collect_episodes(self.envs, policy, num_episodes, seed=seed)

    def retrieve(self, state: str, action: str, k: int | None = None, **filters: Any) -> list[Transition]:
        """The demonstrations this worker's buffer retrieves for (state, action) now."""
        if self.buffer is None:
            raise ConfigError("this worker was started without buffer=<location>")
        return self.buffer.retrieve(state, action, k, **filters)

    def curriculum_rollouts(self) -> dict[str, int]:
        """Rollouts per task in the worker's current curriculum statistics (all workers' outcomes)."""
        if self.sampler is None:
            raise ConfigError("this worker was started without task_pool=<location>")
        self.sampler.refresh()
        return {task_id: s.rollouts for task_id, s in self.sampler.stats().items()}

    def close(self) -> None:
        """Close the vector env, and the buffer and task pool it opened."""
        self.envs.close()
        if self.buffer is not None:
            self.buffer.close()
        if self.sampler is not None:
            self.sampler.pool.close()


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
        buffer: Replay buffer location every worker opens (``postgresql://...`` for one buffer across
            machines). ``None``: none, unless ``env_kwargs`` gives a retriever.
        task_pool: Curriculum task pool location every worker samples from and records into.
        buffer_kwargs: ``BufferConfig`` fields for opening ``buffer``.
        curriculum_kwargs: ``CurriculumSampler`` keyword arguments.
        **env_kwargs: Passed to ``gymnasium.make_vec`` in each worker (model, top_k, ...).

    Example:
        >>> pool = RayRolloutPool("DreamGym/WebShop-v0", num_workers=8, envs_per_worker=32,
        ...                       endpoints=["http://node1:8000/v1", "http://node2:8000/v1"], model="my-model")
        >>> episodes = pool.collect(policy, episodes_per_worker=64)

        One buffer and one curriculum for the cluster:

        >>> pool = RayRolloutPool("DreamGym/WebShop-v0", num_workers=8, envs_per_worker=32,
        ...                       buffer="postgresql://dreamgym:pw@db:5432/runs",
        ...                       task_pool="postgresql://dreamgym:pw@db:5432/runs", model="my-model")
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
        buffer: str | None = None,
        task_pool: str | None = None,
        buffer_kwargs: Mapping[str, Any] | None = None,
        curriculum_kwargs: Mapping[str, Any] | None = None,
        **env_kwargs: Any,
    ) -> None:
        try:
            import ray
        except ImportError as e:
            raise DependencyNotInstalled("ray", "distributed", "Ray rollout workers") from e
        if num_workers < 1:
            raise ConfigError(f"num_workers must be at least 1, got {num_workers}.")
        _check_shared("buffer", buffer, address)
        _check_shared("task_pool", task_pool, address)
        stores = {
            "buffer": buffer,
            "task_pool": task_pool,
            "buffer_kwargs": dict(buffer_kwargs or {}),
            "curriculum_kwargs": dict(curriculum_kwargs or {}),
        }
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
            self.workers.append(actor.remote(env_id, envs_per_worker, kwargs, **stores))

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
