import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # another module's cluster: start a fresh local one
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


def test_ray_pool_collects_from_every_worker(ray_local):
    from dreamgym_env.distributed import RayRolloutPool
    from dreamgym_env.rollout import RandomPolicy

    pool = RayRolloutPool(
        "DreamGym/ALFWorld-v0",
        num_workers=2,
        envs_per_worker=2,
        backend="scripted",
        max_steps=3,
        endpoints=["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"],
    )
    try:
        episodes = pool.collect(RandomPolicy(fallback="look"), episodes_per_worker=3, seed=0)
    finally:
        pool.close()
    assert len(episodes) == 6
    assert all(len(ep.actions) == 3 and ep.truncated for ep in episodes)
    assert len({ep.episode_id for ep in episodes}) == 6
