"""A deterministic world's known steps: answered once, then from memory, real ones first."""

from __future__ import annotations

import asyncio
import pickle

import gymnasium as gym
import numpy as np
import pytest

from dreamgym_env import ScriptedBackend
from dreamgym_env.errors import BackendError, ConfigError
from dreamgym_env.experience.memo import StepMemo, memo_key, task_fingerprint
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Step, Task, Transition

TASK = Task(task_id="t-1", domain="textworld", instruction="find the coin")
PRINT = task_fingerprint(TASK.task_id, TASK.instruction, {})


def _output(state: str) -> ExperienceOutput:
    return ExperienceOutput(reasoning="", next_state=state, done=False, success=False)


def _answering(*answers: str) -> ScriptedBackend:
    return ScriptedBackend([_output(a) for a in answers])


def _transition(source: str, action: str = "go west", next_state: str = "west room") -> Transition:
    return Transition.of_step(
        TASK,
        episode_id="e",
        step=0,
        state="s0",
        action=action,
        next_state=next_state,
        reward=0.0,
        done=False,
        success=False,
        source=source,  # type: ignore[arg-type]
    )


def test_real_transitions_are_remembered_and_simulated_ones_are_not() -> None:
    memo = StepMemo()
    assert memo.add_real([_transition("offline"), _transition("sim", action="go east")]) == 1
    assert memo.real(PRINT, "s0", "go west") == _output("west room")
    assert memo.real(PRINT, "s0", "go east") is None
    assert memo.real(task_fingerprint("t-2", TASK.instruction, {}), "s0", "go west") is None
    assert memo.stats()["real_hits"] == 1


def test_model_answers_are_keyed_by_what_the_model_is_shown_and_the_oldest_goes_first() -> None:
    memo = StepMemo(max_size=2)
    keys = [memo_key(PRINT, [], "s0", f"go {d}") for d in ("north", "south", "east")]
    for i, key in enumerate(keys):
        memo.put(key, _output(f"room {i}"))
        if i == 1:
            assert memo.get(keys[0]) == _output("room 0")  # used: now the newest
    assert memo.get(keys[1]) is None  # dropped: the least recently used when the third came
    assert memo.get(keys[0]) == _output("room 0") and memo.get(keys[2]) == _output("room 2")
    shown = [Step(state="s", action="look")]
    assert memo.get(memo_key(PRINT, shown, "s0", "go north")) is None  # shown another history: another step


def test_a_memo_size_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="max_size"):
        StepMemo(0)


def test_identical_asks_in_flight_share_one_request_and_a_failed_leader_is_not_shared() -> None:
    memo = StepMemo()
    key = memo_key(PRINT, [], "s0", "go west")
    calls = 0

    async def ask() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return f"answer {calls}"

    async def failing() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        raise TimeoutError("leader timed out")

    async def main() -> None:
        results = await asyncio.gather(*(memo.share(key, ask) for _ in range(4)))
        assert results == [("answer 1", False)] + [("answer 1", True)] * 3
        leader = asyncio.ensure_future(memo.share(key, failing))
        await asyncio.sleep(0)
        follower = await memo.share(key, ask)  # the leader fails: the follower asks itself
        assert follower == ("answer 3", False)
        with pytest.raises(TimeoutError):
            await leader

    asyncio.run(main())
    assert calls == 3 and memo.shared == 3


def test_a_memo_survives_pickling_with_what_it_knows() -> None:
    memo = StepMemo()
    memo.add_real([_transition("real")])
    copy = pickle.loads(pickle.dumps(memo))
    assert copy.real(PRINT, "s0", "go west") == _output("west room")


def test_a_repeated_simulated_step_sends_no_request() -> None:
    env = gym.make("DreamGym/TextWorld-v0", backend=_answering("Done.\nCarrying: knife"), top_k=0)
    first, info = env.reset(seed=3)
    acting = next(
        a for a in info["admissible_actions"] if a.split()[0] not in ("look", "inventory", "examine")
    )
    answers = []
    for _ in range(2):
        env.reset(seed=3)
        state, _, _, _, info = env.step(acting)
        answers.append((state, info["answered_by"], info["attempts"]))
    assert answers[1] == (answers[0][0], "memo", 0) and answers[0][1:] == ("model", 1)
    assert env.unwrapped.backend.requests_received == 1  # type: ignore[attr-defined]


def test_memo_size_zero_asks_the_model_every_time() -> None:
    answer = "Done.\nCarrying: knife"
    env = gym.make("DreamGym/TextWorld-v0", backend=_answering(answer, answer), top_k=0, memo_size=0)
    _, info = env.reset(seed=3)
    acting = next(
        a for a in info["admissible_actions"] if a.split()[0] not in ("look", "inventory", "examine")
    )
    for _ in range(2):
        env.reset(seed=3)
        assert env.step(acting)[4]["answered_by"] == "model"
    assert env.unwrapped.backend.requests_received == 2  # type: ignore[attr-defined]


def test_sub_envs_of_a_vector_env_share_one_memo_and_real_transitions_seed_it() -> None:
    backend = _answering("Done.\nCarrying: knife")
    envs = gym.make_vec(
        "DreamGym/TextWorld-v0",
        num_envs=4,
        vectorization_mode="vector_entry_point",
        backend=backend,
        top_k=0,
    )
    first, infos = envs.reset(seed=[3, 3, 3, 3])
    assert len(set(first)) == 1  # one game, one first state
    admissible = infos["admissible_actions"][0]
    acting = [a for a in admissible if a.split()[0] not in ("look", "inventory", "examine")]
    task = envs.unwrapped.envs[0].task  # type: ignore[attr-defined]
    envs.unwrapped.step_memo.add_real(  # type: ignore[attr-defined]
        [
            Transition.of_step(
                task,
                episode_id="r",
                step=0,
                state=first[0],
                action=acting[1],
                next_state="\n".join(
                    ["Done.", *first[0].split("\n\n")[0].split("\n")[:-1], "Carrying: spoon"]
                ),
                reward=0.0,
                done=False,
                success=False,
                source="real",
                task_metadata=envs.unwrapped.envs[0].domain.hidden_facts(task),  # type: ignore[attr-defined]
            )
        ]
    )
    _, _, _, _, infos = envs.step(np.array([acting[0], acting[0], acting[0], acting[1]], dtype=object))
    assert sorted(infos["answered_by"]) == ["memo", "memo", "model", "replay"]
    assert backend.requests_received == 1
    envs.close()


# Two small games by hand: the west room holds a coin, the east room an apple (or, in game B, a pear).
_START = "Room: west room\nExits: east\nHere: coin\nCarrying: nothing\n\nYour task is to: take the apple and the coin."


def _game(task_id: str, east_thing: str, goal: str = "in(apple, I)\nin(coin, I)") -> Task:
    world = (
        "Map: west room: east east room; east room: west west room\n"
        "Room: west room | Exits: east | Here: coin\n"
        f"Room: east room | Exits: west | Here: {east_thing}"
    )
    return Task(
        task_id=task_id,
        domain="textworld",
        instruction="take the apple and the coin.",
        metadata={"world": world, "goal": goal, "initial_observation": _START},
    )


def _textworld_env(task: Task, backend: ScriptedBackend, memo: StepMemo | None = None) -> gym.Env:  # type: ignore[type-arg]
    return gym.make(
        "DreamGym/TextWorld-v0", tasks=[task], backend=backend, top_k=0, step_memo=memo, history_window=0
    )


def test_a_game_saved_under_another_games_id_is_not_answered_from_its_memo() -> None:
    memo = StepMemo()
    game_a, game_b = _game("textworld-g", "apple"), _game("textworld-g", "pear")
    backend = _answering(
        "Done.\nRoom: east room\nExits: west\nHere: apple", "Done.\nRoom: east room\nExits: west\nHere: pear"
    )
    env_a, env_b = _textworld_env(game_a, backend, memo), _textworld_env(game_b, backend, memo)
    env_a.reset(seed=0)
    assert "apple" in env_a.step("go east")[0]
    env_b.reset(seed=0)
    state, _, _, _, info = env_b.step("go east")
    assert info["answered_by"] == "model" and "pear" in state
    # A's real transitions answer A's steps, never B's.
    hidden = env_a.unwrapped.domain.hidden_facts(game_a)  # type: ignore[attr-defined]
    memo.add_real(
        [
            Transition.of_step(
                game_a,
                episode_id="real-a",
                step=0,
                state=_START,
                action="take coin",
                next_state="Done.\nRoom: west room\nExits: east\nHere: nothing\nCarrying: coin",
                reward=0.0,
                done=False,
                success=False,
                source="real",
                task_metadata=hidden,
            )
        ]
    )
    env_b.reset(seed=0)
    with pytest.raises(BackendError, match="ran out"):  # no replay for B: the model is asked (none left)
        env_b.step("take coin")
    env_a.reset(seed=0)
    assert env_a.step("take coin")[4]["answered_by"] == "replay"


def test_a_remembered_step_is_judged_again_with_its_own_episode() -> None:
    """Episode 1 wins by taking the coin after the apple; episode 2 takes the coin alone: no win."""
    backend = _answering(
        "Done.\nRoom: east room\nExits: west\nHere: apple",
        "Done.\nHere: nothing\nCarrying: apple",
        "Done.\nHere: apple\nCarrying: nothing",
        "Done.\nRoom: west room\nExits: east\nHere: coin",
        "Done.\nHere: nothing\nCarrying: coin",
    )
    env = _textworld_env(_game("textworld-two-quests", "apple"), backend)
    env.reset(seed=0)
    for action in ("go east", "take apple", "drop apple", "go west"):
        assert env.step(action)[1] == 0.0
    _, reward, terminated, _, _ = env.step("take coin")
    assert (reward, terminated) == (1.0, True)
    env.reset(seed=0)
    outcomes = [env.step(action) for action in ("go east", "go west", "take coin")]
    assert [o[4]["answered_by"] for o in outcomes] == ["memo", "memo", "memo"]
    assert [(o[1], o[2]) for o in outcomes] == [(0.0, False)] * 3
    assert outcomes[-1][0].startswith("Done.")
