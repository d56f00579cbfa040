"""The simulated MiniWoB domain: packaged tasks recorded from real resets, in BrowserGym's listing format."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.curriculum.validators import validate_task
from dreamgym_env.domains import get_domain
from dreamgym_env.domains.miniwob import (
    MINIWOB_DISPLAY_URL,
    MiniWoBDomain,
    load_miniwob_tasks,
    miniwob_display_urls,
    miniwob_task,
)
from dreamgym_env.domains.miniwob.curriculum import validate_miniwob
from dreamgym_env.domains.miniwob.policies import SOLVED_TASKS, interactive_actions, random_action, solution
from dreamgym_env.errors import DataFormatError, DomainError
from dreamgym_env.experience.backends.scripted import ScriptedBackend


def test_packaged_tasks_are_recorded_pages_of_the_named_tasks() -> None:
    tasks = get_domain("miniwob").seed_tasks()
    names = {t.metadata["miniwob_task"] for t in tasks}
    assert set(SOLVED_TASKS) <= names and len({t.task_id for t in tasks}) == len(tasks)
    for task in tasks:
        state = get_domain("miniwob").initial_state(task, np.random.default_rng(0)).state
        name = task.metadata["miniwob_task"]
        assert state.splitlines()[1] == f"URL: {MINIWOB_DISPLAY_URL}{name}.html"
        assert state.splitlines()[2].startswith("RootWebArea ") and "127.0.0.1" not in state
        assert task.task_id == f"miniwob.{name}-{task.metadata['seed']}"
        assert validate_task(task) is None, task.task_id


@pytest.mark.parametrize("name", SOLVED_TASKS)
def test_every_recorded_page_lists_what_its_scripted_solution_needs(name: str) -> None:
    for task in (t for t in get_domain("miniwob").seed_tasks() if t.metadata["miniwob_task"] == name):
        assert solution(name, task.instruction, task.metadata["initial_state"])


def test_simulated_env_starts_from_the_recorded_page_and_passes_check_env() -> None:
    task = get_domain("miniwob").seed_tasks()[0]
    env = gym.make("DreamGym/MiniWoB-v0", backend=ScriptedBackend())
    obs, info = env.reset(seed=0, options={"task": task})
    assert obs == task.metadata["initial_state"] and info["task"] == task.instruction
    assert gym.spec("DreamGym/MiniWoB-v0").max_episode_steps == 10
    check_env(env.unwrapped, skip_render_check=True)


def test_a_task_without_a_recorded_page_says_how_to_get_one() -> None:
    with pytest.raises(DomainError, match="record_miniwob_tasks"):
        MiniWoBDomain().initial_state(miniwob_task("click-button", 3, "Click."), np.random.default_rng(0))


def test_task_file_errors_name_the_line(tmp_path: Path) -> None:
    good = {
        "miniwob_task": "click-button",
        "seed": 1,
        "instruction": "Click on the yes button.",
        "state": "s",
    }
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "seed": "one"}) + "\n")
    with pytest.raises(DataFormatError, match="line 2.*'seed' must be int"):
        load_miniwob_tasks(path)
    path.write_text(json.dumps(good) + "\n")
    (task,) = MiniWoBDomain.load_tasks(path)
    assert task.metadata == {"miniwob_task": "click-button", "seed": 1, "initial_state": "s"}


def test_validator_checks_the_name_and_the_page() -> None:
    page = f"Tab 0 (current): x\nURL: {MINIWOB_DISPLAY_URL}click-button.html"
    assert validate_miniwob(miniwob_task("click-button", 1, "Click on the yes button.", page)) is None
    assert "task name" in str(validate_miniwob(miniwob_task("Click Button", 1, "Click it.", page)))
    assert "not the page" in str(validate_miniwob(miniwob_task("click-link", 1, "Click it.", page)))
    assert "no recorded" in str(validate_miniwob(miniwob_task("click-link", 1, "Click it.")))


def test_page_urls_read_the_same_whatever_served_them() -> None:
    served = "URL: http://127.0.0.1:41234/miniwob/enter-text.html\nRootWebArea 'x', url='file:///a/miniwob/enter-text.html'"
    assert miniwob_display_urls(served) == (
        f"URL: {MINIWOB_DISPLAY_URL}enter-text.html\nRootWebArea 'x', url='{MINIWOB_DISPLAY_URL}enter-text.html'"
    )


def test_random_policy_acts_only_on_listed_interactive_elements() -> None:
    task = next(t for t in get_domain("miniwob").seed_tasks() if t.metadata["miniwob_task"] == "choose-list")
    state = task.metadata["initial_state"]
    actions = interactive_actions(state)
    assert "click('19')" in actions and "select_option('13', 'Ertha')" in actions
    assert all(MiniWoBDomain().validate_action(a) is None for a in actions)
    rng = np.random.default_rng(0)
    assert {random_action(state, rng) for _ in range(200)} == set(actions)
    assert random_action("Tab 0 (current): x\nURL: u", rng) == "noop()"
