"""ALFWorld real: hand-written games in ALFWorld's PDDL format played through the real engine."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import dreamgym_env  # noqa: F401 - registers DreamGym/ALFWorld-v0
from dreamgym_env.real import register_real_envs
from tests._policies import ScriptedPolicy, run_episode

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    pytest.importorskip("alfworld")
    from benchmarks._alfworld_games import write_games

    return write_games(tmp_path_factory.mktemp("alfworld_games"))


def test_planner_expert_solves_every_handwritten_game(games: list[str]) -> None:
    register_real_envs()
    env = gym.make("DreamGym/ALFWorld-Real-v0", game_files=games)
    for i, game in enumerate(games):
        reward, success, steps, info = run_episode(env, ScriptedPolicy(), seed=i, options={"game_file": game})
        assert (reward, success) == (1.0, True), f"{game} after {steps} steps: {info}"
        assert info["source"] == "real" and info["simulated"] is False and info["reasoning"] == ""
    env.close()


def test_first_state_has_the_simulated_format(games: list[str]) -> None:
    from dreamgym_env.domains.alfworld.engine import ALFWorldRealEnv
    from dreamgym_env.domains.alfworld.tasks import parse_alfworld_goal

    env = ALFWorldRealEnv(games)
    obs, info = env.reset(seed=0, options={"game_index": 0})
    first, second = obs.splitlines()
    assert first.startswith(
        "You are in the middle of a room. Looking quickly around you, you see a cabinet 2"
    )
    assert second == f"Your task is to: {info['task']}"
    assert parse_alfworld_goal(info["task"])["task_type"] == "pick_cool_then_place_in_recep"
    assert "go to fridge 1" in info["admissible_actions"] and info["expert_plan"]
    assert all(env.domain.validate_action(a) is None for a in info["admissible_actions"] if a != "help")
    obs, *_ = env.step("help")  # outside the simulated grammar, but the engine admits it
    assert not obs.startswith("[Invalid action]")
    env.close()


def test_one_policy_runs_on_sim_and_real_alfworld(games: list[str]) -> None:
    register_real_envs()
    policy = ScriptedPolicy()
    sim = gym.make("DreamGym/ALFWorld-v0", backend="scripted")
    real = gym.make("DreamGym/ALFWorld-Real-v0", game_files=games)
    for env in (sim, real):
        _, _, steps, info = run_episode(env, policy, seed=0, max_steps=4)
        assert steps >= 1 and info["simulated"] is (env is sim)
        env.close()


def test_real_alfworld_passes_check_env(games: list[str]) -> None:
    from dreamgym_env.domains.alfworld.engine import ALFWorldRealEnv

    env = ALFWorldRealEnv(games[:1])
    check_env(env, skip_render_check=True)
    env.close()
