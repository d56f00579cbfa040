"""The learned and privileged settings: what a simulated TextWorld episode may know of the real game."""

from __future__ import annotations

import gymnasium as gym
import pytest

from dreamgym_env import ScriptedBackend
from dreamgym_env.domains.textworld.state import dream_layout, nearby_facts
from dreamgym_env.errors import DomainError
from dreamgym_env.experience.memo import StepMemo
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Task, Transition
from dreamgym_env.tasks import TaskList

START = "Room: west room\nExits: east\nHere: chest (closed)\nCarrying: nothing\n\nYour task is to: take the apple."
WORLD = (
    "Map: west room: east east room; east room: west west room\n"
    "Room: west room | Exits: east | Here: chest (closed)\n"
    "Room: east room | Exits: west | Here: apple, banana\n"
    "Inside: chest: key"
)
GAME = Task(
    task_id="textworld-g",
    domain="textworld",
    instruction="take the apple.",
    metadata={"world": WORLD, "goal": "in(apple, I)", "initial_observation": START, "game_file": "g.z8"},
)
EAST_DREAMT = "Done.\nRoom: east room\nExits: west\nHere: pear"


def _answers(*states: str) -> ScriptedBackend:
    return ScriptedBackend(
        [ExperienceOutput(reasoning="", next_state=s, done=False, success=False) for s in states]
    )


def _env(setting: str, backend: ScriptedBackend, **kwargs: object) -> gym.Env:  # type: ignore[type-arg]
    return gym.make(
        "DreamGym/TextWorld-v0", tasks=[GAME], backend=backend, setting=setting, history_window=0, **kwargs
    )


def _prompt(backend: ScriptedBackend) -> str:
    return "\n".join(str(m["content"]) for m in backend.requests[-1].messages)


def test_a_learned_dream_never_sees_the_games_layout_or_goal() -> None:
    backend = _answers(EAST_DREAMT)
    env = _env("learned", backend, top_k=0)
    env.reset(seed=0)
    _, _, _, _, info = env.step("go east")
    prompt = _prompt(backend)
    assert "banana" not in prompt  # the real east room is not given
    assert "in(apple, I)" not in prompt and "chest: key" not in prompt
    assert info["setting"] == "learned" and info["answered_by"] == "model"
    assert env.unwrapped.task.metadata.keys() == {"initial_observation", "game_file"}  # type: ignore[attr-defined]


def test_the_privileged_setting_gives_the_layout() -> None:
    backend = _answers(EAST_DREAMT)
    env = _env("privileged", backend, top_k=0)
    env.reset(seed=0)
    assert env.step("go east")[4]["setting"] == "privileged"
    assert "east room | Exits: west | Here: apple, banana" in _prompt(backend)


def test_a_learned_dream_keeps_the_room_it_invented() -> None:
    """Back west and east again: the prompt carries the east room as the dream showed it (a pear)."""
    backend = _answers(EAST_DREAMT, "Done.\nRoom: west room\nExits: east\nHere: chest (closed)", EAST_DREAMT)
    env = _env("learned", backend, top_k=0, memo_size=0)
    env.reset(seed=0)
    env.step("go east")
    env.step("go west")
    env.step("go east")
    assert "east: Room: east room | Exits: west | Here: pear" in _prompt(backend)


def test_a_learned_dream_replays_no_real_transition_of_its_game() -> None:
    memo = StepMemo()
    real = Transition.of_step(
        GAME,
        episode_id="real",
        step=0,
        state=START,
        action="go east",
        next_state="Done.\nRoom: east room\nExits: west\nHere: apple\nCarrying: nothing",
        reward=0.0,
        done=False,
        success=False,
        source="real",
        task_metadata={"world": WORLD, "goal": "in(apple, I)"},
    )
    memo.add_real([real])
    privileged = _env("privileged", _answers(), top_k=0, step_memo=memo)
    privileged.reset(seed=0)
    assert privileged.step("go east")[4]["answered_by"] == "replay"
    backend = _answers(EAST_DREAMT)
    learned = _env("learned", backend, top_k=0, step_memo=memo)
    learned.reset(seed=0)
    state, _, _, _, info = learned.step("go east")
    assert info["answered_by"] == "model" and "pear" in state


class _Demos:
    """A retriever holding a real transition of the game itself and one of another game."""

    def __init__(self) -> None:
        other = GAME.model_copy(update={"task_id": "textworld-other"})
        self.rows = [
            Transition.of_step(
                task,
                episode_id=f"e-{task.task_id}",
                step=0,
                state=START,
                action="go east",
                next_state=f"Done.\nRoom: east room\nExits: west\nHere: {thing}\nCarrying: nothing",
                reward=0.0,
                done=False,
                success=False,
                source="offline",
            )
            for task, thing in ((GAME, "apple"), (other, "plum"))
        ]
        self.asked: list[int] = []

    def retrieve(self, state: str, action: str, k: int, **_: object) -> list[Transition]:
        self.asked.append(k)
        return self.rows[:k]

    def add(self, transition: Transition) -> None:
        pass


def test_a_learned_dream_is_shown_demonstrations_of_other_games_only() -> None:
    demos = _Demos()
    backend = _answers(EAST_DREAMT)
    env = _env("learned", backend, top_k=1, retriever=demos, memo_size=0)
    env.reset(seed=0)
    assert env.step("go east")[4]["answered_by"] == "model"
    prompt = _prompt(backend)
    assert "plum" in prompt and "Here: apple" not in prompt
    assert demos.asked[-1] > 1  # asked for more, to fill top_k after its own game's were dropped


def test_a_learned_dream_is_paid_by_its_own_verdict() -> None:
    backend = _answers(EAST_DREAMT, "You won.\nHere: nothing\nCarrying: pear")
    env = _env("learned", backend, top_k=0)
    env.reset(seed=0)
    env.step("go east")
    _, reward, terminated, _, info = env.step("take pear")
    assert (reward, terminated, info["success"]) == (1.0, True, True)


def test_a_learned_dream_lists_every_carried_thing_for_a_lock() -> None:
    backend = _answers("Done.\nHere: chest (locked)\nCarrying: coin, stick")
    env = _env("learned", backend, top_k=0)
    env.reset(seed=0)
    _, _, _, _, info = env.step("close chest")
    assert {"unlock chest with coin", "unlock chest with stick"} <= set(info["admissible_actions"])


def test_dream_layout_joins_rooms_both_ways_and_keeps_what_a_closed_container_held() -> None:
    states = [
        "Room: a\nExits: east\nHere: box (open, holds: key, pen)\nCarrying: nothing",
        "Done.\nRoom: a\nExits: east\nHere: box (closed)\nCarrying: nothing",
        "Done.\nRoom: b\nExits: west, north\nHere: nothing\nCarrying: nothing",
    ]
    layout = dream_layout(states, ["close box", "go east"])
    assert layout.splitlines() == ["Map: a: east b; b: west a", "Inside: box: key, pen"]
    back = nearby_facts(states[1], layout, states[:1], "open box")
    assert back == "Inside: box: key, pen"
    assert dream_layout([states[1]], []) == ""  # nothing shown yet: the dream knows nothing more


def test_a_task_list_refuses_two_tasks_under_one_id() -> None:
    with pytest.raises(DomainError, match="'textworld-g'"):
        TaskList([GAME, GAME.model_copy(update={"instruction": "take the pear."})])


def test_an_unknown_setting_is_refused() -> None:
    with pytest.raises(Exception, match="setting"):
        _env("copied", _answers())


def test_steps_are_told_apart_by_what_the_episode_had_shown() -> None:
    from dreamgym_env.domains.textworld.state import consistent_reveal, step_kind

    west = "Room: west room\nExits: east\nHere: chest (closed)\nCarrying: nothing"
    east = "Done.\nRoom: east room\nExits: west\nHere: apple\nCarrying: nothing"
    back = "Done.\nRoom: west room\nExits: east\nHere: chest (closed)\nCarrying: nothing"
    opened = "Done.\nRoom: west room\nExits: east\nHere: chest (open, holds: key)\nCarrying: nothing"
    closed = back
    assert step_kind([], west, "go east", east) == ("go", "revealing")
    assert step_kind([west], east, "go west", back) == ("go", "determined")  # seen before
    assert step_kind([], west, "open chest", opened) == ("open", "revealing")
    assert step_kind([west, opened], closed, "open chest", opened) == ("open", "determined")
    assert step_kind([], west, "look", "Nothing happens.\n" + west) == ("observe", "observe")
    assert step_kind([], west, "take chest", "Nothing happens.\n" + west) == ("take", "no_change")
    assert step_kind(
        [west], east, "take apple", "Done.\nRoom: east room\nExits: west\nHere: nothing\nCarrying: apple"
    ) == (
        "take",
        "determined",
    )
    invented = "Done.\nRoom: hall\nExits: west, north\nHere: lamp\nCarrying: nothing"
    assert consistent_reveal(west, "go east", invented, east)  # another room, with the way back
    assert not consistent_reveal(west, "go east", invented.replace("west, ", ""), east)
    assert not consistent_reveal(
        west, "go east", invented.replace("Carrying: nothing", "Carrying: lamp"), east
    )


def test_fidelity_is_reported_by_family_kind_and_who_answered() -> None:
    from dreamgym_env.evaluation.fidelity import aggregate, score_transition

    def real(action: str, next_state: str, done: bool = False, success: bool = False) -> Transition:
        return Transition.of_step(
            GAME,
            episode_id="e",
            step=0,
            state=START,
            action=action,
            next_state=next_state,
            reward=0.0,
            done=done,
            success=success,
            source="real",
        )

    lost = real("eat key", "You lost.\nRoom: west room", done=True)
    guess = ExperienceOutput(reasoning="", next_state="You lost.\nRoom: west room", done=True, success=False)
    scores = [
        score_transition(guess, lost, family="eat", kind="determined", answered_by="model"),
        score_transition(None, real("take key", "x"), family="take", kind="determined", answered_by="none"),
        score_transition(
            guess, real("go east", "y"), family="go", kind="revealing", answered_by="memo", consistent=True
        ),
    ]
    report = aggregate("m", scores, setting="learned")
    assert report.setting == "learned" and report.loss_recall == 1.0 and report.loss_precision == 0.5
    assert report.determined_change_exact == 0.5 and report.revealing_consistent == 1.0
    assert report.by_family["eat"] == {
        "n": 1,
        "exact_match": 1.0,
        "answered_by_model": 1.0,
        "model_exact_match": 1.0,
    }
    assert report.by_answered_by["memo"]["n"] == 1 and report.by_kind["revealing"]["consistent"] == 1.0


def test_dream_layout_forgets_contents_taken_out() -> None:
    states = [
        "Room: a\nExits: east\nHere: box (open, holds: key)\nCarrying: nothing",
        "Done.\nRoom: a\nExits: east\nHere: box (open, empty)\nCarrying: key",
        "Done.\nRoom: a\nExits: east\nHere: box (closed)\nCarrying: key",
    ]
    assert dream_layout(states, ["take key from box", "close box"]) == ""
