"""A real id made without what it needs says what to pass and how to get it."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import pytest

import dreamgym_env  # noqa: F401  (registers the ids)
from dreamgym_env.errors import ConfigError, DependencyNotInstalled


def test_textworld_real_without_games_says_what_to_pass_and_how_to_build_games() -> None:
    with pytest.raises(ConfigError) as caught:
        gym.make("DreamGym/TextWorld-Real-v0")
    message = str(caught.value)
    assert "game_files=[...]" in message and "make_games(" in message and "build_suite" in message
    assert "tw-make" in message and "docs/real_envs.md" in message


@pytest.mark.skipif(importlib.util.find_spec("web_agent_site") is not None, reason="WebShop is installed")
def test_webshop_real_without_webshop_says_what_installs_it() -> None:
    env = gym.make("DreamGym/WebShop-Real-v0")
    with pytest.raises(DependencyNotInstalled) as caught:
        env.reset(seed=0)
    message = str(caught.value)
    assert "git clone https://github.com/princeton-nlp/WebShop" in message and "setup.sh" in message
    assert "PYTHONPATH" in message and 'pip install "dreamgym-env[real]"' not in message
