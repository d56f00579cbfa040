"""SimToRealEnv: schedule, caller's signal, and real transitions written to the buffer as real."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dreamgym_env.domains.webshop.engine import WebShopRealEnv
from dreamgym_env.env import DreamGymEnv
from dreamgym_env.errors import ConfigError
from dreamgym_env.records import Transition
from dreamgym_env.wrappers.sim_to_real import SimToRealEnv, SimToRealSchedule
from tests.real.test_real_webshop import FakeWebShop


class ListBuffer:
    def __init__(self) -> None:
        self.items: list[Transition] = []

    def add(self, transition: Transition) -> None:
        self.items.append(transition)

    def retrieve(self, state: str, action: str, k: int, **kwargs: Any) -> list[Transition]:
        return []


def _env(schedule: SimToRealSchedule, buffer: ListBuffer | None = None) -> SimToRealEnv:
    return SimToRealEnv(
        DreamGymEnv("webshop", backend="scripted"),
        WebShopRealEnv(FakeWebShop()),
        schedule=schedule,
        retriever=buffer,
    )


def test_switches_after_n_episodes_and_stores_only_real_transitions() -> None:
    buffer = ListBuffer()
    env = _env(SimToRealSchedule(switch_after=2), buffer)
    sources = []
    for episode in range(4):
        obs, info = env.reset(seed=episode)
        for action in ("search[deodorant]", "click[B078GWRC1J]", "click[Buy Now]"):
            obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        sources.append(info["source"])
    assert sources == ["sim", "sim", "real", "real"]
    assert env.episodes == {"sim": 2, "real": 2}
    assert len(buffer.items) == 6 and all(t.source == "real" for t in buffer.items)
    first = buffer.items[0]
    assert first.state.startswith("WebShop | search page") and first.action == "search[deodorant]"
    assert first.next_state.startswith("WebShop | results") and first.step == 0 and first.domain == "webshop"
    assert buffer.items[2].done and buffer.items[2].reward == 0.5


def test_real_transitions_carry_what_build_sft_needs() -> None:
    """The stored form is the real env's own: task facts and the admissible actions before and after."""
    buffer = ListBuffer()
    env = _env(SimToRealSchedule(switch_after=0), buffer)
    env.reset(seed=0)
    env.step("search[deodorant]")
    env.step("click[B078GWRC1J]")
    first, second = buffer.items
    assert first.prev_admissible_actions == [] and "click[B078GWRC1J]" in first.admissible_actions
    assert second.prev_admissible_actions == first.admissible_actions
    assert "click[Buy Now]" in second.admissible_actions
    assert set(first.metadata) >= {"task_metadata", "admissible_actions", "prev_admissible_actions"}


def test_callers_signal_overrides_schedule_and_invalid_actions_are_not_stored() -> None:
    buffer = ListBuffer()
    env = _env(SimToRealSchedule(), buffer)  # simulator only, unless told
    env.reset(seed=0)
    assert env.phase == "sim"
    env.use("real")
    _, info = env.reset()
    assert env.phase == "real" and info["source"] == "real"
    env.step("not an action")
    assert buffer.items == []
    env.use(None)
    env.reset()
    assert env.phase == "sim"


def test_mixing_fraction_and_validation() -> None:
    schedule = SimToRealSchedule(real_fraction_before=0.3)
    rng = np.random.default_rng(0)
    share = np.mean([schedule.choose(i, rng) == "real" for i in range(2000)])
    assert 0.25 < share < 0.35
    with pytest.raises(ConfigError):
        SimToRealSchedule(real_fraction_after=1.5)
    with pytest.raises(ConfigError):
        _env(SimToRealSchedule()).use("both")  # type: ignore[arg-type]
