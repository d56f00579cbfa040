"""Failure paths of rollouts: cancelled vector steps, envs made before a failure, failed resets."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import pytest

from dreamgym_env import DreamGymEnv, DreamGymVectorEnv, ScriptedBackend
from dreamgym_env.episode import EpisodeEnv
from dreamgym_env.errors import DreamGymError
from dreamgym_env.records import Task
from dreamgym_env.simulated import SimulatedWorld
from dreamgym_env.tasks import EpisodeOutcome
from dreamgym_env.training.collector import collect_groups
from tests._toy import ToyDomain

TASK = Task(task_id="toy-1", domain="toy", instruction="Reach room 1")


class Held(ScriptedBackend):
    """The scripted world, except that every request waits until it is cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.cancelled = 0

    async def acomplete(self, request):
        self.in_flight += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1


def test_a_cancelled_vector_step_cancels_its_requests_and_leaves_the_envs_as_they_were():
    backend = Held()
    envs = DreamGymVectorEnv(ToyDomain(), num_envs=4, backend=backend)
    envs.reset(seed=1)
    rng_before = [env.np_random.bit_generator.state for env in envs.envs]

    async def main() -> int:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(envs.astep(["go[1]"] * 4), 0.2)
        return backend.in_flight  # read before the loop ends (which would cancel leftovers itself)

    assert asyncio.run(main()) == 0
    assert backend.cancelled == 4
    assert all(env.history == [] for env in envs.envs)
    assert [env.np_random.bit_generator.state for env in envs.envs] == rng_before


class _Policy:
    async def act(self, messages: Sequence[dict[str, str]], admissible_actions: Sequence[str]) -> str:
        return "stop"


@pytest.mark.parametrize("failing", ["reset_options", "progress_bar"])
def test_collect_groups_leaves_no_vector_env_open_when_setting_up_fails(monkeypatch, failing):
    made, closed = [], []
    init, close_extras = DreamGymVectorEnv.__init__, DreamGymVectorEnv.close_extras

    def counted_init(self: DreamGymVectorEnv, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    def counted_close(self: DreamGymVectorEnv, **kwargs: Any) -> None:
        closed.append(self)
        close_extras(self, **kwargs)

    monkeypatch.setattr(DreamGymVectorEnv, "__init__", counted_init)
    monkeypatch.setattr(DreamGymVectorEnv, "close_extras", counted_close)

    def broken(*args: Any) -> Any:
        raise ValueError(f"{failing} failed")

    if failing == "progress_bar":  # e.g. tqdm missing
        monkeypatch.setattr("dreamgym_env.training.collector._progress_bar", broken)
    with pytest.raises(ValueError, match=f"{failing} failed"):
        collect_groups(
            "DreamGym/TextWorld-v0",
            [TASK],
            _Policy(),
            2,
            env_kwargs={"backend": ScriptedBackend()},
            progress=True,
            **({"reset_options": broken} if failing == "reset_options" else {}),
        )
    assert made == closed


class _CountedEnv(DreamGymEnv):
    made: list[_CountedEnv] = []
    fail_at = 2

    def __init__(self, **kwargs: Any) -> None:
        if len(_CountedEnv.made) == _CountedEnv.fail_at:
            raise DreamGymError("the third game process did not start")
        super().__init__(ToyDomain(), backend=ScriptedBackend(), **kwargs)
        self.closed = False
        _CountedEnv.made.append(self)

    def close(self) -> None:
        self.closed = True
        super().close()


def test_collect_groups_closes_the_envs_it_made_when_a_later_one_fails():
    env_id = "ReviewToy/NoVector-v0"  # no vector entry point: one env per slot, like the real wrappers
    gym.register(env_id, entry_point=_CountedEnv, disable_env_checker=True)
    _CountedEnv.made = []
    try:
        with pytest.raises(DreamGymError, match="did not start"):
            collect_groups(env_id, [TASK], _Policy(), 4, max_concurrency=4)
        assert len(_CountedEnv.made) == 2 and all(env.closed for env in _CountedEnv.made)
    finally:
        gym.registry.pop(env_id, None)


# ---------------------------------------------------------------- the episode core
class _FailingStart(SimulatedWorld):
    """The toy world, except that a reset fails while ``fail_begin`` is set."""

    fail_begin = False

    def reset(self, options, rng):
        if self.fail_begin:
            raise DreamGymError("the world could not start")
        return super().reset(options, rng)


def test_an_episode_cut_short_is_reported_once_even_if_the_next_reset_fails():
    world = _FailingStart(ToyDomain(), backend=ScriptedBackend())
    outcomes: list[EpisodeOutcome] = []
    env = EpisodeEnv(ToyDomain(), world, on_episode_end=outcomes.append)
    env.reset(seed=0)
    env.step("go[1]")
    world.fail_begin = True
    with pytest.raises(DreamGymError, match="could not start"):
        env.reset()
    world.fail_begin = False
    env.reset()
    assert [(o.reward, o.success) for o in outcomes] == [(0.0, False)]


def test_max_steps_zero_is_refused_like_any_step_limit_below_one():
    """``max_steps`` goes straight to :class:`EpisodeEnv`, whatever its world (the real wrappers' way)."""
    world = SimulatedWorld(ToyDomain(), backend=ScriptedBackend())
    with pytest.raises(DreamGymError, match="max_steps must be at least 1"):
        EpisodeEnv(ToyDomain(), world, max_steps=0)
    assert EpisodeEnv(ToyDomain(), world).max_steps == ToyDomain.max_steps  # None: the domain's limit


# ---------------------------------------------------------------- the served policy
def _chat_answer(body: dict, client_port: int) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "go[1]"}}
        ],
    }


def test_a_chat_policy_answers_from_each_event_loop_it_is_called_in():
    """``asyncio.run`` twice (a script, a notebook cell each): the second call gets its own client."""
    from dreamgym_env.training.collector import ChatPolicy
    from tests._http import serve_json

    server = serve_json(_chat_answer)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        policy = ChatPolicy(url, "m", max_retries=0, timeout_s=5)
        messages = [{"role": "user", "content": "Room 2."}]
        assert asyncio.run(policy.act(messages, [])) == "go[1]"
        assert asyncio.run(policy.act(messages, [])) == "go[1]"

        async def twice_then_close() -> str:
            answer = str(await policy.act(messages, []))
            await policy.aclose()
            return answer

        assert asyncio.run(twice_then_close()) == "go[1]"
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- lock-step rollouts
@pytest.mark.parametrize("failing", [0, 2])
def test_a_failed_policy_call_in_lockstep_cancels_the_other_episodes_calls(failing):
    """On the shared event loop nothing cancels leftovers for us: a failure must not leave them running."""
    from gymnasium.vector import AutoresetMode

    from dreamgym_env.rollout import EpisodeJob, aplay_episodes

    envs = DreamGymVectorEnv(
        ToyDomain(), num_envs=3, backend=ScriptedBackend(), autoreset_mode=AutoresetMode.DISABLED
    )
    waiting: list[int] = []
    cancelled: list[int] = []

    async def policy(k: int, observation: str, info: dict[str, Any]) -> str:
        if k == failing:
            await asyncio.sleep(0.05)  # the others are waiting by then
            raise RuntimeError(f"the policy server refused job {k}")
        waiting.append(k)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(k)
            raise
        return "stop"  # pragma: no cover - never reached

    async def main() -> list[int]:
        with pytest.raises(RuntimeError, match=f"refused job {failing}"):
            await aplay_episodes(envs, [EpisodeJob(seed=i) for i in range(3)], policy)
        return sorted(cancelled)  # read before the loop ends (which would cancel leftovers itself)

    others = sorted({0, 1, 2} - {failing})
    assert asyncio.run(main()) == others
    assert sorted(waiting) == others
    envs.close()


def test_human_rendering_prints_the_first_observation_too(capsys):
    """Gymnasium's convention: a ``human`` env renders after ``reset`` as after every ``step``."""
    env = DreamGymEnv(ToyDomain(), backend=ScriptedBackend(), render_mode="human")
    obs, _ = env.reset(seed=0)
    printed = capsys.readouterr().out
    assert "Step 0" in printed and obs in printed
    env.step("go[1]")
    assert "Step 1" in capsys.readouterr().out
