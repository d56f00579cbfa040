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
    assert first == again and first.startswith("Room: ") and "Your task is to:" in first
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
    assert obs.startswith("Room: ") and "\nCarrying: " in obs and "Your task is to:" in obs
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


@pytest.mark.real
def test_real_and_simulated_ids_truncate_at_the_same_step(games: list[str]) -> None:
    """Swapping DreamGym/TextWorld-v0 for its -Real-v0 twin keeps the registered step limit."""
    from dreamgym_env.real.textworld import tasks_from_games

    register_real_envs()
    real = gym.make("DreamGym/TextWorld-Real-v0", game_files=games)
    sim = gym.make("DreamGym/TextWorld-v0", backend="scripted", tasks=tasks_from_games(games))
    for env in (real, sim):
        assert env.spec is not None and env.spec.max_episode_steps == 50
        env.reset(seed=0)
        for t in range(1, 61):  # noqa: B007  (t is the step that truncated)
            *_, terminated, truncated, _ = env.step("")  # invalid: counts, never terminates
            if truncated:
                break
        assert (t, terminated, truncated) == (50, False, True)
        env.close()


@pytest.mark.real
def test_facts_states_are_canonical_and_the_world_stays_hidden(games: list[str]) -> None:
    from dreamgym_env.real.textworld import TextWorldRealEnv

    env = TextWorldRealEnv(games)
    first, info = env.reset(seed=0, options={"game_file": games[0]})
    task = env.task
    assert task is not None and task.metadata["world"] and task.metadata["goal"]
    assert task.metadata["world"] not in first and "goal" not in first.lower()
    room = first.splitlines()[0].removeprefix("Room: ")
    world = task.metadata["world"].splitlines()
    assert world[0].startswith(f"Map: {room}: ")  # the start room first
    assert world[1] == " | ".join(first.splitlines()[:3])  # each room as a state shows it on arrival
    after_look, *_ = env.step("look")
    assert after_look.splitlines()[0] == "Nothing happens."  # look changes no fact
    assert after_look.split("\n", 1)[1] == first.split("\n\n")[0]  # the same world reads the same
    plan = info["expert_plan"]
    obs, reward, terminated = "", 0.0, False
    for action in plan:
        obs, reward, terminated, _, info = env.step(action)
    assert terminated and reward == 1.0 and obs.splitlines()[0] == "You won."
    env.close()


@pytest.mark.real
def test_text_format_keeps_the_games_prose(games: list[str]) -> None:
    from dreamgym_env.errors import ConfigError
    from dreamgym_env.real.textworld import TextWorldRealEnv

    env = TextWorldRealEnv(games, state_format="text")
    first, _ = env.reset(seed=0, options={"game_file": games[0]})
    assert first.startswith("-= ") and "world" not in (env.task.metadata if env.task else {})
    env.close()
    with pytest.raises(ConfigError, match="state_format"):
        TextWorldRealEnv(games, state_format="html")  # type: ignore[arg-type]


@pytest.mark.real
def test_the_domains_rules_agree_with_the_engine_step_by_step(games: list[str]) -> None:
    """The commands the domain lists and the wins it judges match the real engine's, on noisy expert play."""
    import random

    from dreamgym_env.domains.textworld.goal import goal_reached
    from dreamgym_env.real.textworld import TextWorldRealEnv

    domain = TextWorldDomain()
    env = TextWorldRealEnv(games)
    rng = random.Random(5)
    wins = 0
    for i, game in enumerate(games):
        first, info = env.reset(seed=i, options={"game_file": game})
        task = env.task
        assert task is not None
        steps: list[tuple[str, str]] = []
        plan = list(info["expert_plan"])
        for _ in range(40):
            noisy = rng.random() < 0.3 or not plan
            action = rng.choice(info["admissible_actions"]) if noisy else plan.pop(0)
            state, _, terminated, truncated, info = env.step(action)
            steps.append((action, state))
            assert domain.admissible_actions(state, task) == sorted(info["admissible_actions"]), action
            assert (
                goal_reached(task.metadata["goal"], task.metadata["world"], first, steps) == info["success"]
            )
            if terminated or truncated:
                wins += info["success"]
                break
            if noisy:  # back on the expert's path from wherever the noise led
                plan = list(info.get("expert_plan") or plan)
    env.close()
    assert wins >= 1  # the check saw a win, not only steps that do not win
