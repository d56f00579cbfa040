"""MiniWoB++ through BrowserGym in Debian's Chromium, pages served from 127.0.0.1: real rewards."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from dreamgym_env.buffer.loaders import iter_records
from dreamgym_env.buffer.loaders.base import LoadIssue, Record
from dreamgym_env.domains import get_domain
from dreamgym_env.domains.miniwob import MINIWOB_DISPLAY_URL
from dreamgym_env.domains.miniwob.policies import SOLVED_TASKS, solution
from dreamgym_env.real import register_real_envs

pytestmark = pytest.mark.real


@pytest.fixture(scope="module", autouse=True)
def _engines() -> None:
    pytest.importorskip("browsergym.miniwob")
    pytest.importorskip("miniwob")
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (scripts/install_real.sh installs it)")
    register_real_envs()


def _first_packaged(name: str):
    return next(t for t in get_domain("miniwob").seed_tasks() if t.metadata["miniwob_task"] == name)


@pytest.mark.parametrize("name", SOLVED_TASKS)
def test_scripted_solution_earns_the_real_reward_from_the_recorded_first_page(name: str) -> None:
    task = _first_packaged(name)
    env = gym.make("DreamGym/MiniWoB-Real-v0")
    try:
        obs, info = env.reset(seed=0, options={"task": task})
        # The page the simulator starts this task from is the page the real env shows.
        assert obs == task.metadata["initial_state"]
        assert info["task"] == task.instruction and info["task_id"] == task.task_id
        assert f"URL: {MINIWOB_DISPLAY_URL}{name}.html" in obs
        reward, terminated = 0.0, False
        for action in solution(name, info["task"], obs):
            assert not terminated, f"ended before {action}"
            obs, reward, terminated, truncated, info = env.step(action)
            assert info["last_action_error"] is None, info["last_action_error"]
        assert terminated and reward == 1.0 and info["success"], obs
    finally:
        env.close()


def test_wrong_answer_ends_without_reward_and_bad_action_says_why() -> None:
    env = gym.make("DreamGym/MiniWoB-Real-v0", task="click-button")
    try:
        obs, info = env.reset(seed=0, options={"page_seed": 0})
        obs2, reward, terminated, _, info = env.step("click('99999')")  # well-formed; no such element
        assert info["last_action_error"] and "99999" in info["last_action_error"] and not terminated
        wrong = next(line for line in obs.splitlines() if "button '" in line and "'no'" not in line)
        bid = wrong.split("]")[0].strip().lstrip("[")
        _, reward, terminated, _, info = env.step(f"click('{bid}')")
        assert terminated and reward == 0.0 and not info["success"]
    finally:
        env.close()


def test_check_env_passes_on_the_real_id() -> None:
    env = gym.make("DreamGym/MiniWoB-Real-v0", task="focus-text")
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_recorded_run_loads_into_the_buffer_format(tmp_path: Path) -> None:
    task = _first_packaged("login-user")
    env = gym.make("DreamGym/MiniWoB-Real-v0", record_dir=str(tmp_path))
    try:
        obs, info = env.reset(seed=0, options={"task": task})
        played = []
        for action in solution("login-user", info["task"], obs):
            before = obs
            obs, reward, terminated, truncated, info = env.step(action)
            played.append((before, action, obs, reward, terminated))
        env.reset(seed=1, options={"task": "click-button"})  # a second episode; left unfinished
    finally:
        env.close()
    episodes = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(episodes) == 2
    items = list(iter_records([tmp_path]))  # the format is detected from the folder
    records = [r for r in items if isinstance(r, Record)]
    issues = [i for i in items if isinstance(i, LoadIssue)]
    assert len(records) == 1 and len(issues) == 1 and "no action" in issues[0].message
    loaded = records[0].transitions
    assert [(t.state, t.action, t.next_state, t.reward, t.done) for t in loaded] == played
    assert {t.domain for t in loaded} == {"miniwob"} and loaded[-1].success
    assert {t.task for t in loaded} == {task.instruction} and {t.source for t in loaded} == {"offline"}
