"""TextWorld, real and simulated: generated games played through the real engine, and one policy on both."""

from __future__ import annotations

import pickle

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from dreamgym_env.domains.textworld import TextWorldDomain
from dreamgym_env.env import DreamGymEnv
from dreamgym_env.real import register_real_envs
from tests._policies import ScriptedPolicy, run_episode

INFO_KEYS = {
    "task",
    "task_id",
    "episode_id",
    "step",
    "admissible_actions",
    "success",
    "reasoning",
    "simulated",
    "source",
    "last_action_error",
}


def test_textworld_domain_draws_reproducible_rooms() -> None:
    env = DreamGymEnv(TextWorldDomain(), backend="scripted")
    first, info = env.reset(seed=3)
    again, _ = env.reset(seed=3)
    assert first == again and first.startswith("-= ") and "Your task is to:" in first
    assert "look" in info["admissible_actions"]
    for action in ("go east", "take key from chest", "put red apple on table", "unlock door with old key"):
        assert env.domain.validate_action(action) is None
    assert env.domain.validate_action("dance wildly!") is not None


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    pytest.importorskip("textworld")
    from dreamgym_env.real.textworld import make_games

    return make_games(tmp_path_factory.mktemp("tw_games"), n=2, seed=11)


@pytest.mark.real
def test_expert_plan_wins_every_generated_game(games: list[str]) -> None:
    register_real_envs()
    env = gym.make("DreamGym/TextWorld-Real-v0", game_files=games)
    for i, game in enumerate(games):
        reward, success, steps, info = run_episode(env, ScriptedPolicy(), seed=i, options={"game_file": game})
        assert (reward, success) == (1.0, True), f"{game}: {info}"
        assert info["simulated"] is False and info["source"] == "real" and info.keys() >= INFO_KEYS
    env.close()


@pytest.mark.real
def test_real_textworld_contract(games: list[str]) -> None:
    from dreamgym_env.real.textworld import TextWorldRealEnv

    env = TextWorldRealEnv(games)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert obs.startswith("-= ") and "Your task is to:" in obs and "$$" not in obs  # no ASCII banner
    obs2, *_ = env.step("dance wildly!")  # outside the grammar: feedback state, engine untouched
    assert obs2.startswith("[Invalid action]")
    clone = pickle.loads(pickle.dumps(env))
    assert clone.reset(seed=0)[0] == obs
    clone.close()
    env.close()


@pytest.mark.real
def test_one_policy_runs_on_sim_and_real_textworld(games: list[str]) -> None:
    from dreamgym_env.real.textworld import TextWorldRealEnv, tasks_from_games

    tasks = tasks_from_games(games)
    sim = DreamGymEnv(TextWorldDomain(), tasks=tasks, backend="scripted")
    real = TextWorldRealEnv(games)
    policy = ScriptedPolicy()
    sim_obs, sim_info = sim.reset(seed=0, options={"task": tasks[0]})
    real_obs, real_info = real.reset(seed=0, options={"game_file": games[0]})
    assert sim_obs == real_obs and sim_info["admissible_actions"] == real_info["admissible_actions"]
    assert sim_info.keys() & INFO_KEYS == real_info.keys() & INFO_KEYS == INFO_KEYS
    for env in (sim, real):
        _, _, steps, info = run_episode(env, policy, seed=1, max_steps=5)
        assert steps >= 1 and info["source"] == ("sim" if env is sim else "real")
    real.close()
