"""A TextWorld quest judged from the canonical states of an episode, and the domain ruling a step's ending."""

from __future__ import annotations

import pytest

from dreamgym_env.domains import get_domain
from dreamgym_env.domains.textworld.goal import goal_reached, parse_goal
from dreamgym_env.records import Step, Task

START = """Room: kitchen
Exits: east, north (wooden door: closed)
Here: chest (closed), table (on: knife)
Carrying: nothing

Your task is to: put the key on the table."""

WORLD = """Map: kitchen: east hall
Room: kitchen | Exits: east, north (wooden door: closed) | Here: chest (closed), table (on: knife)
Room: hall | Exits: west | Here: bed
Inside: chest: key"""


def _state(result: str, here: str, carrying: str = "nothing", room: str = "kitchen", exits: str = "") -> str:
    exits = exits or "east, north (wooden door: closed)"
    return f"{result}\nRoom: {room}\nExits: {exits}\nHere: {here}\nCarrying: {carrying}"


OPENED = _state("Done.", "chest (open, holds: key), table (on: knife)")
TAKEN = _state("Done.", "chest (open, empty), table (on: knife)", carrying="key")
PUT = _state("You won.", "chest (open, empty), table (on: key, knife)")


def test_parse_goal_reads_quests_ways_and_facts() -> None:
    assert parse_goal("at(P, kitchen); in(key, I)\non(apple, table) or in(apple, fridge)") == [
        [[("at", ("P", "kitchen")), ("in", ("key", "I"))]],
        [[("on", ("apple", "table"))], [("in", ("apple", "fridge"))]],
    ]
    assert parse_goal("cooked(apple)") is None  # a predicate a state cannot show: not judged
    assert parse_goal("the key is on the table") is None


def test_a_goal_is_reached_on_the_step_whose_state_meets_it() -> None:
    steps = [("open chest", OPENED), ("take key from chest", TAKEN), ("put key on table", PUT)]
    reached = [goal_reached("on(key, table)", WORLD, START, steps[: i + 1]) for i in range(3)]
    assert reached == [False, False, True]
    assert goal_reached("in(key, I)", WORLD, START, steps[:2]) is True
    assert goal_reached("in(key, chest); open(chest)", WORLD, START, steps[:1]) is True


def test_a_closed_container_keeps_what_the_layout_or_the_episode_showed_in_it() -> None:
    # The layout says the chest holds the key; a step that does not open it still knows.
    look = _state("Nothing happens.", "chest (closed), table (on: knife)")
    assert goal_reached("in(key, chest); closed(chest)", WORLD, START, [("look", look)]) is True
    closed_again = _state("Done.", "chest (closed), table (on: knife)")
    steps = [("open chest", OPENED), ("take key from chest", TAKEN), ("close chest", closed_again)]
    assert goal_reached("in(key, chest); closed(chest)", WORLD, START, steps) is False


def test_each_quest_completes_once_and_the_game_is_won_when_all_have() -> None:
    door_open = _state("Done.", "chest (closed), table (on: knife)", exits="east, north (wooden door: open)")
    door_closed = _state("Done.", "chest (closed), table (on: knife)")
    goal = "open(wooden door)\nclosed(wooden door)"
    # The first state's closed door does not count: quests are judged after steps, as the engine does.
    assert goal_reached(goal, WORLD, START, [("open wooden door", door_open)]) is False
    steps = [("open wooden door", door_open), ("close wooden door", door_closed)]
    assert goal_reached(goal, WORLD, START, steps) is True


def test_eaten_things_and_the_players_room_count() -> None:
    with_apple = START.replace("Carrying: nothing", "Carrying: apple")
    ate = _state("Done.", "chest (closed), table (on: knife)")
    refused = _state("Nothing happens.", "chest (closed), table (on: knife)", carrying="apple")
    assert goal_reached("eaten(apple)", WORLD, with_apple, [("eat apple", ate)]) is True
    assert goal_reached("eaten(apple)", WORLD, with_apple, [("eat apple", refused)]) is False
    hall = _state("Done.", "bed", room="hall", exits="west")
    assert goal_reached("at(P, hall)", WORLD, START, [("go east", hall)]) is True
    assert goal_reached("at(P, hall)", WORLD, START, [("go east", "You are in the hall.")]) is None


def _task(goal: str = "on(key, table)") -> Task:
    metadata = {"world": WORLD, "goal": goal} if goal else {}
    return Task(task_id="t", domain="textworld", instruction="put the key on the table", metadata=metadata)


HISTORY = [Step(state=START, action="open chest"), Step(state=OPENED, action="take key from chest")]


def test_the_domain_rules_a_win_the_answer_missed_and_rewrites_its_result_line() -> None:
    domain = get_domain("textworld")
    missed = PUT.replace("You won.", "Done.")
    outcome = domain.judge_step(_task(), HISTORY, TAKEN, "put key on table", missed)
    assert outcome is not None
    assert (outcome.next_state, outcome.done, outcome.success) == (PUT, True, True)
    not_yet = domain.judge_step(_task(), HISTORY[:1], OPENED, "take key from chest", TAKEN)
    assert not_yet is not None and (not_yet.next_state, not_yet.done, not_yet.success) == (
        TAKEN,
        False,
        False,
    )


@pytest.mark.parametrize(
    ("result", "done", "success"),
    [("You won.", True, True), ("You lost.", True, False), ("Done.", False, False)],
)
def test_the_result_line_ends_an_episode_without_a_goal_to_check(
    result: str, done: bool, success: bool
) -> None:
    outcome = get_domain("textworld").judge_step(
        _task(goal=""), HISTORY, TAKEN, "look", TAKEN.replace("Done.", result)
    )
    assert outcome is not None and (outcome.done, outcome.success) == (done, success)


def test_a_win_the_states_do_not_show_is_no_win() -> None:
    claimed = TAKEN.replace("Done.", "You won.")  # the key is not shown on the table
    outcome = get_domain("textworld").judge_step(_task(), HISTORY, TAKEN, "put key on table", claimed)
    assert outcome is not None and (outcome.next_state, outcome.done, outcome.success) == (
        TAKEN,
        False,
        False,
    )
    assert get_domain("textworld").judge_step(_task(), HISTORY, TAKEN, "look", "You see a kitchen.") is None


def test_the_simulated_env_pays_a_win_the_models_answer_did_not_flag() -> None:
    import gymnasium as gym

    from dreamgym_env import ScriptedBackend
    from dreamgym_env.experience.schema import ExperienceOutput

    answers = [
        "Done.\nHere: chest (open, holds: key), table (on: knife)",
        "Done.\nHere: chest (open, empty), table (on: key, knife)",
    ]
    backend = ScriptedBackend(
        [ExperienceOutput(reasoning="", next_state=a, done=False, success=False) for a in answers]
    )
    env = gym.make("DreamGym/TextWorld-v0", backend=backend, top_k=0)
    task = _task().model_copy(update={"metadata": {**_task().metadata, "initial_observation": START}})
    env.reset(seed=0, options={"task": task})
    _, reward, terminated, _, _ = env.step("open chest")
    assert (reward, terminated) == (0.0, False)
    state, reward, terminated, _, info = env.step("put key on table")
    assert (reward, terminated, info["success"]) == (1.0, True, True) and state.startswith("You won.\n")


def test_a_fail_event_loses_the_game_and_the_judge_says_so() -> None:
    from dreamgym_env.domains.textworld import TextWorldDomain
    from dreamgym_env.domains.textworld.goal import goal_outcome, parse_goal, parse_losses
    from dreamgym_env.records import Step, Task

    goal = "at(P, vault); in(gem, I)\nlost if: in(decoy, I)"
    assert parse_goal(goal) == [[[("at", ("P", "vault")), ("in", ("gem", "I"))]]]
    assert parse_losses(goal) == [[("in", ("decoy", "I"))]]
    start = "Room: vault\nExits: west\nHere: decoy, gem\nCarrying: nothing\n\nYour task is to: take the gem."
    took_decoy = "Done.\nRoom: vault\nExits: west\nHere: gem\nCarrying: decoy"
    took_gem = "Done.\nRoom: vault\nExits: west\nHere: decoy\nCarrying: gem"
    assert goal_outcome(goal, "", start, [("take decoy", took_decoy)]) == (False, True)
    assert goal_outcome(goal, "", start, [("take gem", took_gem)]) == (True, False)
    task = Task(task_id="t", domain="textworld", instruction="take the gem.", metadata={"goal": goal})
    judged = TextWorldDomain().judge_step(task, [], start, "take decoy", took_decoy)
    assert judged is not None and (judged.done, judged.success) == (True, False)
    assert judged.next_state.startswith("You lost.")
    claimed = (
        "You lost.\nRoom: vault\nExits: west\nHere: decoy\nCarrying: gem"  # a loss the states do not show
    )
    judged = TextWorldDomain().judge_step(
        task, [Step(state=start, action="look")], start, "take gem", claimed
    )
    assert judged is not None and judged.success and judged.next_state.startswith("You won.")
