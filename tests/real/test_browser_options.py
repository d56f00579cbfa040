"""The browser keywords of the real web envs: one definition, checked the same way for every wrapper.

Constructing a browser env starts no browser (Chromium starts at the first reset), so these run in
milliseconds and need neither BrowserGym nor Chromium.
"""

import gymnasium as gym
import pytest

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.domains.miniwob.engine import DEFAULT_MINIWOB_TASKS, MiniWoBRealEnv
from dreamgym_env.domains.miniwob.policies import SOLVED_TASKS
from dreamgym_env.domains.webarena.engine import WebArenaRealEnv
from dreamgym_env.errors import ConfigError
from dreamgym_env.real.browser import DEFAULT_CHROMIUM_FLAGS, BrowserOptions

KEYWORDS = {
    "executable_path": None,
    "chromium_flags": ["--lang=en-US"],
    "headless": False,
    "visible_only": True,
    "browser_kwargs": {"timeout": 5000, "viewport": {"width": 800, "height": 600}},
}

MAKERS = {
    "webarena": lambda **kw: WebArenaRealEnv(start_url="http://127.0.0.1:1/", goal="look", **kw),
    "miniwob": lambda **kw: MiniWoBRealEnv(task="click-button", **kw),
}


@pytest.mark.parametrize("which", sorted(MAKERS))
def test_every_browser_env_keeps_the_same_options_from_the_same_keywords(which: str) -> None:
    env = MAKERS[which](**KEYWORDS)
    assert env.browser_options == BrowserOptions(**KEYWORDS)
    assert env.browser_options.chromium_flags == ("--lang=en-US",)
    assert env.browser_options.browser_env_kwargs() == {
        "headless": False,
        "pw_chromium_kwargs": {"chromium_sandbox": False},
        "timeout": 5000,
        "viewport": {"width": 800, "height": 600},
    }
    default = MAKERS[which]()
    assert default.browser_options == BrowserOptions()
    assert default.browser_options.executable_path == "/usr/bin/chromium"
    assert default.browser_options.chromium_flags == DEFAULT_CHROMIUM_FLAGS


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("DreamGym/WebArena-Real-v0", {"start_url": "http://127.0.0.1:1/", "goal": "look"}),
        ("DreamGym/MiniWoB-Real-v0", {"task": "click-button"}),
    ],
)
def test_gym_make_takes_the_browser_keywords_and_the_step_limit(env_id: str, kwargs: dict) -> None:
    env = gym.make(env_id, **kwargs, **KEYWORDS, max_steps=4)
    try:
        assert env.unwrapped.browser_options == BrowserOptions(**KEYWORDS)
        assert env.unwrapped.max_steps == 4
    finally:
        env.close()


@pytest.mark.parametrize("which", sorted(MAKERS))
def test_flags_given_as_one_string_are_refused_not_split_into_characters(which: str) -> None:
    with pytest.raises(ConfigError, match="chromium_flags"):
        MAKERS[which](chromium_flags="--lang=en-US")


@pytest.mark.parametrize("which", sorted(MAKERS))
@pytest.mark.parametrize("key", ["headless", "pw_chromium_kwargs", "task_kwargs"])
def test_browser_kwargs_that_the_wrapper_sets_itself_are_refused_up_front(which: str, key: str) -> None:
    """Before, these failed only at the first reset, inside BrowserGym, as a duplicate keyword."""
    with pytest.raises(ConfigError, match=f"{key} cannot go in browser_kwargs"):
        MAKERS[which](browser_kwargs={key: {}})


@pytest.mark.parametrize("which", sorted(MAKERS))
def test_a_misspelt_keyword_is_still_refused(which: str) -> None:
    with pytest.raises(TypeError, match="headles"):
        MAKERS[which](headles=False)


def test_default_miniwob_tasks_are_solved_tasks() -> None:
    """The real env's default tasks come from the solved list, so a default task always has a solution."""
    assert set(DEFAULT_MINIWOB_TASKS) <= set(SOLVED_TASKS) and len(DEFAULT_MINIWOB_TASKS) == 7
    assert MiniWoBRealEnv().tasks == list(DEFAULT_MINIWOB_TASKS)


def test_the_chromium_launcher_is_replaced_whole_and_runs(tmp_path, monkeypatch):
    """The launcher is written aside and renamed in, so a browser starting meanwhile never runs half a script."""
    import os
    import subprocess

    from dreamgym_env.real.browser import use_system_chromium

    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path))
    first = use_system_chromium("/bin/echo", ["--one"])
    inode = first.stat().st_ino
    again = use_system_chromium("/bin/echo", ["--two", "it's"])
    assert again == first and first.stat().st_ino != inode  # a new file took the old one's place
    assert os.access(first, os.X_OK)
    assert subprocess.run([str(first), "x"], capture_output=True, text=True).stdout == "--two it's x\n"
    assert sorted(p.name for p in first.parent.iterdir()) == ["chrome"]  # no staging file left behind
