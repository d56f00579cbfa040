"""Ray workers sharing one replay buffer and one task pool in PostgreSQL (several local workers)."""

import pytest

from dreamgym_env.curriculum.pool import TaskPool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


def test_a_transition_written_on_one_worker_is_retrieved_on_another(ray_local, postgres_url):
    from dreamgym_env.distributed import RayRolloutPool
    from dreamgym_env.rollout import RandomPolicy

    pool = RayRolloutPool(
        "DreamGym/ALFWorld-v0",
        num_workers=2,
        envs_per_worker=2,
        backend="scripted",
        max_steps=3,
        buffer=postgres_url,
        task_pool=postgres_url,
        curriculum_kwargs={"group_n": 1000, "min_rollouts": 1},
    )
    try:
        a, b = pool.workers
        policy = RandomPolicy(fallback="look")
        ray_local.get([b.retrieve.remote("anything", "look", 1), b.curriculum_rollouts.remote()])  # opened
        episodes_a = ray_local.get(a.collect.remote(policy, 3, 0))
        first = episodes_a[0]
        hits = ray_local.get(b.retrieve.remote(first.observations[0], first.actions[0], 1))
        assert hits and hits[0].episode_id in {ep.episode_id for ep in episodes_a}
        assert (hits[0].state, hits[0].action) == (first.observations[0], first.actions[0])

        # B has recorded nothing itself, yet its curriculum statistics count every outcome A recorded.
        with TaskPool(postgres_url) as shared:
            recorded = {}
            for outcome in shared.outcomes():
                recorded[outcome.task_id] = recorded.get(outcome.task_id, 0) + 1
        assert sum(recorded.values()) >= len(episodes_a)
        seen_by_b = ray_local.get(b.curriculum_rollouts.remote())
        assert {task: seen_by_b[task] for task in recorded} == recorded
    finally:
        pool.close()
