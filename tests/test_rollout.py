from dreamgym_env import DreamGymVectorEnv, ScriptedBackend
from dreamgym_env.rollout import collect_episodes
from tests._toy import ToyDomain


def test_collect_episodes_cuts_the_stream_into_episodes():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=3, backend=ScriptedBackend())
    calls = []

    def policy(obs, info):
        calls.append(info["step"])
        return "stop" if info["step"] >= 1 else "go[1]"

    episodes = collect_episodes(envs, policy, num_episodes=7, seed=0)
    assert len(episodes) == 7
    for ep in episodes:
        assert ep.actions == ["go[1]", "stop"] and ep.terminated
        assert len(ep.observations) == 3 and ep.task_id.startswith("toy-")
        assert ep.total_reward == float(ep.success)
    assert {ep.success for ep in episodes} == {True, False}  # the scripted model succeeds on even seeds
    assert len({ep.episode_id for ep in episodes}) == 7


def test_collect_episodes_says_when_the_step_bound_cut_it_short(caplog):
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=2, backend=ScriptedBackend())
    with caplog.at_level("WARNING", logger="dreamgym_env.rollout"):
        episodes = collect_episodes(envs, lambda obs, info: "go[1]", num_episodes=5, seed=0, max_env_steps=3)
    assert len(episodes) < 5
    assert f"max_env_steps=3 with {len(episodes)} of 5 episodes finished" in caplog.text


def test_aplay_episodes_plays_each_job_once_and_idles_ended_sub_envs():
    import asyncio

    from gymnasium.vector import AutoresetMode

    from dreamgym_env._event_loop import run_sync
    from dreamgym_env.rollout import EpisodeJob, aplay_episodes

    envs = DreamGymVectorEnv(
        ToyDomain(), num_envs=2, backend=ScriptedBackend(), autoreset_mode=AutoresetMode.DISABLED
    )
    tasks = [t.task_id for t in ToyDomain().seed_tasks()]
    jobs = [EpisodeJob(seed=k, options={"task": tasks[k % 3]}) for k in range(5)]
    lengths = {0: 1, 1: 3, 2: 2, 3: 1, 4: 2}  # job k stops after lengths[k] actions
    seen = []

    async def policy(k, obs, info):
        seen.append(k)
        await asyncio.sleep(0)
        return "stop" if info["step"] + 1 >= lengths[k] else "go[1]"

    episodes = run_sync(aplay_episodes(envs, jobs, policy))
    assert [len(e.actions) for e in episodes] == [lengths[k] for k in range(5)]
    assert [e.task_id for e in episodes] == [tasks[k % 3] for k in range(5)]
    assert all(e.terminated and e.actions[-1] == "stop" for e in episodes)
    assert sorted(seen) == sorted(k for k in range(5) for _ in range(lengths[k]))


def test_aplay_episodes_needs_the_disabled_autoreset_mode():
    import pytest

    from dreamgym_env._event_loop import run_sync
    from dreamgym_env.errors import ConfigError
    from dreamgym_env.rollout import EpisodeJob, aplay_episodes

    envs = DreamGymVectorEnv(ToyDomain(), num_envs=1, backend=ScriptedBackend())

    async def policy(k, obs, info):
        return "stop"

    with pytest.raises(ConfigError, match="DISABLED"):
        run_sync(aplay_episodes(envs, [EpisodeJob(0)], policy))


def test_disabled_vector_env_lets_ended_sub_envs_sit_out_with_none():
    import pytest
    from gymnasium.vector import AutoresetMode

    from dreamgym_env.errors import ConfigError, DreamGymError

    envs = DreamGymVectorEnv(
        ToyDomain(), num_envs=2, backend=ScriptedBackend(), autoreset_mode=AutoresetMode.DISABLED
    )
    envs.reset(seed=0)
    _, _, terms, _, _ = envs.step(["stop", "go[1]"])
    assert terms.tolist() == [True, False]
    with pytest.raises(DreamGymError, match="None"):
        envs.step(["go[1]", "go[1]"])  # an ended sub-env that is given an action
    with pytest.raises(ConfigError, match="running"):
        envs.step([None, None])  # a running one that is given none
    obs, rewards, terms, truncs, infos = envs.step([None, "stop"])
    assert obs[0] == "" and rewards[0] == 0.0 and terms.tolist() == [False, True]
    with pytest.raises(DreamGymError):
        envs.step(["go[1]", None])  # sub-env 0 is still ended after sitting out


def test_aplay_episodes_without_lockstep_lets_fast_episodes_pass_a_slow_one():
    """Job 0's answers wait until every other job has finished: only unsynchronised play gets there."""
    import asyncio

    from gymnasium.vector import AutoresetMode

    from dreamgym_env._event_loop import run_sync
    from dreamgym_env.experience.backends import Backend
    from dreamgym_env.experience.backends.base import Completion
    from dreamgym_env.experience.backends.scripted import echo_world
    from dreamgym_env.rollout import EpisodeJob, aplay_episodes

    others_done = asyncio.Event()
    finished: list[int] = []

    class HeldBackend(Backend):
        async def acomplete(self, request):
            if request.query.task.task_id == "toy-1":
                await asyncio.wait_for(others_done.wait(), timeout=60)  # under lock-step they never finish
            return Completion(text=echo_world(request).model_dump_json())

    def on_finish(k, episode):
        finished.append(k)
        if len(finished) == 3:
            others_done.set()

    envs = DreamGymVectorEnv(
        ToyDomain(), num_envs=2, backend=HeldBackend(), autoreset_mode=AutoresetMode.DISABLED
    )
    jobs = [EpisodeJob(seed=k, options={"task": "toy-1" if k == 0 else "toy-2"}) for k in range(4)]

    async def policy(k, obs, info):
        return "stop" if info["step"] >= 2 else "go[1]"

    episodes = run_sync(aplay_episodes(envs, jobs, policy, on_finish=on_finish, lockstep=False))
    assert finished == [1, 2, 3, 0]
    assert [e.task_id for e in episodes] == ["toy-1", "toy-2", "toy-2", "toy-2"]
    assert all(e.actions == ["go[1]", "go[1]", "stop"] and e.terminated for e in episodes)
    assert all(len(e.observations) == 4 for e in episodes)


def test_aplay_episodes_without_lockstep_raises_a_failed_step():
    import pytest
    from gymnasium.vector import AutoresetMode

    from dreamgym_env._event_loop import run_sync
    from dreamgym_env.errors import BackendError
    from dreamgym_env.rollout import EpisodeJob, aplay_episodes

    envs = DreamGymVectorEnv(
        ToyDomain(), num_envs=2, backend=ScriptedBackend([]), autoreset_mode=AutoresetMode.DISABLED
    )

    async def policy(k, obs, info):
        return "go[1]"

    with pytest.raises(BackendError, match="ran out"):
        run_sync(aplay_episodes(envs, [EpisodeJob(seed=0)], policy, lockstep=False))
    assert run_sync(aplay_episodes(envs, [], policy, lockstep=False)) == []


def test_one_unbatcher_reads_masks_and_keeps_the_envs_own_underscore_keys():
    """The rollout helpers and the SB3 adapter read Gymnasium's batched infos through one function."""
    import numpy as np

    from dreamgym_env.rollout import unbatch_info, unbatch_infos

    vector = np.array([[1.0], [2.0]])
    infos = {
        "success": np.array([True, False]),
        "_success": np.array([True, False]),
        "_private": np.array(["a", "b"]),  # the env's own key: no "private" beside it, so not a mask
        "features": vector,
        "_features": np.array([True, True]),
        "timing": {"total_s": np.array([0.5, 0.25]), "_total_s": np.array([True, True])},
    }
    first, second = unbatch_infos(infos, 2)
    assert first == {
        "success": True,
        "_private": "a",
        "features": first["features"],
        "timing": {"total_s": 0.5},
    }
    assert type(first["success"]) is bool and "success" not in second and second["_private"] == "b"
    first["features"][0] = 9.0
    assert vector[0, 0] == 1.0  # a copy
    assert unbatch_info(infos, 1) == second
