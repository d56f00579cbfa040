import time

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from dreamgym_env import DreamGymEnv, DreamGymVectorEnv, ScriptedBackend
from dreamgym_env.errors import ConfigError
from tests._toy import ToyDomain

ACTIONS = ["go[1]", "go[2]", "stop", "go[3]", "bad action", "stop", "go[1]", "go[2]"]


def _rollout(envs, steps=8):
    trace = [envs.reset(seed=11)[0]]
    for t in range(steps):
        actions = [ACTIONS[(t + i) % len(ACTIONS)] for i in range(envs.num_envs)]
        obs, rewards, terms, truncs, infos = envs.step(actions)
        trace.append((obs, rewards.tolist(), terms.tolist(), truncs.tolist(), list(infos["step"])))
    return trace


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_matches_sync_vector_env_including_autoreset(mode):
    native = DreamGymVectorEnv(ToyDomain(), num_envs=4, backend=ScriptedBackend(), autoreset_mode=mode)
    sync = SyncVectorEnv(
        [lambda: DreamGymEnv(ToyDomain(), backend=ScriptedBackend()) for _ in range(4)], autoreset_mode=mode
    )
    assert _rollout(native) == _rollout(sync)


def test_next_step_autoreset_ignores_action_after_episode_end():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=2, backend=ScriptedBackend())
    envs.reset(seed=0)
    _, _, terms, _, _ = envs.step(["stop", "go[1]"])
    assert terms.tolist() == [True, False]
    obs, rewards, terms, truncs, infos = envs.step(["go[1]", "go[1]"])
    assert infos["step"][0] == 0 and obs[0].startswith("Room")  # reset, action ignored
    assert rewards[0] == 0 and not terms[0] and not truncs[0]
    assert infos["step"][1] == 2


def test_same_step_autoreset_reports_final_obs():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=2, backend=ScriptedBackend(), autoreset_mode="SameStep")
    envs.reset(seed=0)
    obs, _, terms, _, infos = envs.step(["stop", "go[1]"])
    assert terms[0] and infos["_final_obs"][0]
    assert "You did: stop" in infos["final_obs"][0]
    assert obs[0].startswith("Room")


def test_requests_are_concurrent():
    latency = 0.2
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=16, backend=ScriptedBackend(latency_s=latency))
    envs.reset(seed=0)
    start = time.perf_counter()
    envs.step(["go[1]"] * 16)
    assert time.perf_counter() - start < 4 * latency  # serial would take 16 x latency


def test_groups_share_a_task():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=6, group_size=3, backend=ScriptedBackend())
    _, infos = envs.reset(seed=4)
    ids = list(infos["task_id"])
    assert ids[0] == ids[1] == ids[2] and ids[3] == ids[4] == ids[5]
    assert len(set(infos["episode_id"])) == 6


def test_spaces_and_validation():
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=3, backend=ScriptedBackend())
    assert envs.observation_space.contains(envs.reset(seed=0)[0])
    with pytest.raises(ConfigError, match="actions"):
        envs.step(["stop"])
    with pytest.raises(ConfigError, match="multiple"):
        DreamGymVectorEnv(ToyDomain(), num_envs=3, group_size=2, backend=ScriptedBackend())
    assert isinstance(envs.step(["stop"] * 3)[1], np.ndarray)
