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
