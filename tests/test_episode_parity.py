"""Every simulated env and its real counterpart pass the same checks: one episode contract, not two.

Each pair is the simulated domain (scripted experience model) and its real wrapper on a real engine
(TextWorld and ALFWorld games made locally, BrowserGym on a loopback page, WebShop through the
stand-in that speaks WebAgentTextEnv's text format, since WebShop is not installable from a registry).
The checks need no model and no engine luck: they use the action check, which never reaches the
world, and one admissible (or grammatical) action.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env

from dreamgym_env.env import DreamGymEnv
from dreamgym_env.episode import EpisodeEnv
from dreamgym_env.errors import DreamGymError, InvalidActionError
from dreamgym_env.spaces import FreeText
from tests.real.test_real_browsergym import page_url  # noqa: F401 - the loopback page fixture
from tests.real.test_real_textworld import INFO_KEYS
from tests.real.test_real_webshop import FakeWebShop

CORE_INFO_KEYS = INFO_KEYS | {"is_success"}
NOT_TEXT = ["go[\ud800]", "look\x07", "\x1b[2Jclick('1')"]


@pytest.fixture(scope="module")
def textworld_games(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    pytest.importorskip("textworld")
    from dreamgym_env.real.textworld import make_games

    return make_games(tmp_path_factory.mktemp("parity_tw"), n=1, seed=3)


@pytest.fixture(scope="module")
def alfworld_games(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    pytest.importorskip("alfworld")
    from benchmarks._alfworld_games import write_games

    return write_games(tmp_path_factory.mktemp("parity_alfworld"))[:1]


def _webshop(_: pytest.FixtureRequest, **kw: Any) -> EpisodeEnv:
    from dreamgym_env.domains.webshop.engine import WebShopRealEnv

    return WebShopRealEnv(FakeWebShop(), **kw)


def _textworld(request: pytest.FixtureRequest, **kw: Any) -> EpisodeEnv:
    from dreamgym_env.real.textworld import TextWorldRealEnv

    return TextWorldRealEnv(request.getfixturevalue("textworld_games"), **kw)


def _alfworld(request: pytest.FixtureRequest, **kw: Any) -> EpisodeEnv:
    from dreamgym_env.domains.alfworld.engine import ALFWorldRealEnv

    return ALFWorldRealEnv(request.getfixturevalue("alfworld_games"), **kw)


def _webarena(request: pytest.FixtureRequest, **kw: Any) -> EpisodeEnv:
    from dreamgym_env.domains.webarena.engine import WebArenaRealEnv

    return WebArenaRealEnv(start_url=request.getfixturevalue("page_url"), goal="Show the answer", **kw)


RealFactory = Callable[..., EpisodeEnv]
PAIRS: list[Any] = [
    pytest.param(("webshop", _webshop, "search[red shoes]"), id="webshop"),
    pytest.param(("textworld", _textworld, "look"), id="textworld", marks=pytest.mark.real),
    pytest.param(("alfworld", _alfworld, "look"), id="alfworld", marks=pytest.mark.real),
    pytest.param(("webarena", _webarena, "noop()"), id="webarena", marks=pytest.mark.real),
]


@pytest.fixture
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[EpisodeEnv, EpisodeEnv, str]]:
    domain, factory, action = request.param
    sim = DreamGymEnv(domain, backend="scripted", max_steps=3)
    real = factory(request, max_steps=3)
    yield sim, real, action
    sim.close()
    real.close()


@pytest.mark.parametrize("pair", PAIRS, indirect=True)
def test_sim_and_real_speak_one_contract(pair: tuple[EpisodeEnv, EpisodeEnv, str]) -> None:
    sim, real, action = pair
    assert isinstance(real, EpisodeEnv) and isinstance(sim, EpisodeEnv)
    assert sim.observation_space == real.observation_space and isinstance(sim.observation_space, FreeText)
    assert sim.action_space == real.action_space
    assert sim.max_steps == real.max_steps == 3
    for env, source in ((sim, "sim"), (real, "real")):
        with pytest.raises(DreamGymError, match="reset"):
            env.step(action)
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs) and info.keys() >= CORE_INFO_KEYS
        assert (info["source"], info["simulated"], info["step"]) == (source, source == "sim", 0)
        with pytest.raises(InvalidActionError):
            env.step(3)  # type: ignore[arg-type]
        for bad in [*NOT_TEXT, "dance wildly with the moon!"]:
            state = env.state
            out, reward, terminated, truncated, info = env.step(bad)
            assert out.startswith("[Invalid action]") and out.endswith(state), (source, bad)
            assert env.observation_space.contains(out) and info["last_action_error"]
            assert reward == 0.0 and not terminated and env.last_transition is None
            if truncated:  # the third rejected action reaches the step limit
                assert info["step"] == 3 and info["is_success"] is False
                with pytest.raises(DreamGymError, match="ended"):
                    env.step(action)
                break
        else:
            pytest.fail(f"{source}: no truncation at max_steps=3")


@pytest.mark.parametrize("pair", PAIRS, indirect=True)
def test_sim_and_real_store_one_transition_form(pair: tuple[EpisodeEnv, EpisodeEnv, str]) -> None:
    sim, real, action = pair
    for env, source in ((sim, "sim"), (real, "real")):
        _, info = env.reset(seed=1)
        before = list(info["admissible_actions"])
        play = before[0] if before else action
        obs, _, _, _, info = env.step(play)
        assert env.observation_space.contains(obs) and info.keys() >= CORE_INFO_KEYS
        stored = env.last_transition
        assert stored is not None and (stored.source, stored.action, stored.step) == (source, play, 0)
        assert stored.domain == env.domain.name and stored.next_state == env.state
        assert stored.prev_admissible_actions == before
        assert stored.admissible_actions == list(info["admissible_actions"])
        assert set(stored.metadata) >= {"task_metadata", "admissible_actions", "prev_admissible_actions"}


@pytest.mark.parametrize("pair", PAIRS[:2], indirect=True)
def test_sim_and_real_pass_check_env(pair: tuple[EpisodeEnv, EpisodeEnv, str]) -> None:
    sim, real, _ = pair
    check_env(sim, skip_render_check=True)
    check_env(real, skip_render_check=True)


def test_long_states_are_cut_at_the_same_end_in_sim_and_real() -> None:
    """Both keep a state's head (page header, room, task) and drop its tail; the feedback never cuts it."""
    from dreamgym_env.domains.webshop.engine import WebShopRealEnv

    full_sim, _ = DreamGymEnv("webshop", backend="scripted").reset(seed=0)
    full_real, _ = WebShopRealEnv(FakeWebShop()).reset(seed=0)
    sim = DreamGymEnv("webshop", backend="scripted", max_state_chars=20)
    real = WebShopRealEnv(FakeWebShop(), max_state_chars=20)
    assert sim.observation_space == real.observation_space
    for env, full in ((sim, full_sim), (real, full_real)):
        obs, _ = env.reset(seed=0)
        assert len(full) > 20 and obs == full[:20]
        feedback, *_ = env.step("dance!")
        assert feedback.startswith("[Invalid action]") and feedback.endswith("\n\n" + full[:20])
