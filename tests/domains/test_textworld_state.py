"""TextWorld's canonical state read back from text: change-only answers and the commands a state admits."""

from __future__ import annotations

import pytest

from dreamgym_env.domains.textworld.state import (
    admissible_commands,
    complete_state,
    nearby_facts,
    parse_state,
    split_things,
    state_changes,
)

FIRST = """Room: kitchen
Exits: east, north (wooden door: closed)
Here: chest (open, holds: apple, key), table (on: knife, old map)
Carrying: nothing

Your task is to: take the key."""

AFTER_TAKE = """Done.
Room: kitchen
Exits: east, north (wooden door: closed)
Here: chest (open, holds: apple), table (on: knife, old map)
Carrying: key"""

WORLD = "Map: kitchen: east hall\nKeys: wooden door: key\nKinds: supporters: counter, table; food: apple"


def test_an_answer_holds_the_result_and_only_the_changed_lines() -> None:
    answer = state_changes(FIRST, AFTER_TAKE)
    assert answer == "Done.\nHere: chest (open, holds: apple), table (on: knife, old map)\nCarrying: key"
    assert complete_state(FIRST, answer) == AFTER_TAKE


def test_a_step_that_changes_nothing_answers_its_result_line_alone() -> None:
    looked = AFTER_TAKE.replace("Done.", "Nothing happens.")
    assert state_changes(AFTER_TAKE, looked) == "Nothing happens."
    assert complete_state(AFTER_TAKE, "Nothing happens.") == looked


def test_a_whole_state_stands_for_itself_and_prose_is_left_alone() -> None:
    assert complete_state(FIRST, AFTER_TAKE) == AFTER_TAKE
    prose = "-= Kitchen =-\nYou are in a kitchen."
    assert state_changes(prose, "You take the key.") == "You take the key."
    assert complete_state(prose, "You take the key.") == "You take the key."


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("Here: nothing", "result line"),
        ("Done.\nPocket: key", "not a state line"),
        ("Done.\nCarrying: key\nCarrying: apple", "twice"),
        ("", "result line"),
    ],
)
def test_an_answer_that_cannot_apply_says_why(answer: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        complete_state(FIRST, answer)


@pytest.mark.parametrize(
    ("answer", "here", "carrying"),
    [  # the answer gives the line a thing moved to; the line it left is kept, less that thing
        ("Done.\nCarrying: key", "chest (open, holds: apple), table (on: knife, old map)", "key"),
        ("Done.\nCarrying: knife, old map", "chest (open, holds: apple, key), table", "knife, old map"),
        ("Done.\nCarrying: apple, key", "chest (open, empty), table (on: knife, old map)", "apple, key"),
    ],
)
def test_a_thing_the_answer_moves_leaves_the_line_the_answer_kept(
    answer: str, here: str, carrying: str
) -> None:
    completed = parse_state(complete_state(FIRST, answer))
    assert completed is not None
    assert (completed.lines["Here"], completed.lines["Carrying"]) == (here, carrying)


def test_a_thing_put_down_leaves_what_is_carried() -> None:
    put = complete_state(
        AFTER_TAKE, "Done.\nHere: chest (open, holds: apple), table (on: key, knife, old map)"
    )
    assert put.endswith(
        "Here: chest (open, holds: apple), table (on: key, knife, old map)\nCarrying: nothing"
    )
    both = "Done.\nHere: chest (open, holds: apple), table (on: key)\nCarrying: key"  # the answer's own lines stand
    assert complete_state(AFTER_TAKE, both).endswith(both.partition("\n")[2])


def test_parse_state_refuses_partial_or_repeated_lines() -> None:
    parsed = parse_state(FIRST)
    assert parsed is not None and parsed.quest.endswith("take the key.")
    assert parse_state("Done.\nRoom: kitchen") is None
    assert parse_state(AFTER_TAKE + "\nCarrying: apple") is None


def test_split_things_keeps_nested_lists_whole() -> None:
    assert split_things("chest (open, holds: a, b), key") == ["chest (open, holds: a, b)", "key"]
    assert split_things("nothing") == []


def test_admissible_commands_follow_the_games_rules() -> None:
    state = """Done.
Room: kitchen
Exits: east, north (wooden door: locked), west (gate: closed)
Here: chest (open, holds: apple, coin), counter, box (locked), rag
Carrying: key, apple"""
    commands = set(admissible_commands(state, WORLD) or [])
    expected = {
        "look",
        "inventory",
        "go east",
        "examine wooden door",
        "unlock wooden door with key",
        "examine gate",
        "open gate",
        "examine chest",
        "close chest",
        "insert key into chest",
        "take apple from chest",
        "take coin from chest",
        "examine coin",
        "examine counter",
        "put key on counter",
        "put apple on counter",
        "examine box",
        "examine rag",
        "take rag",
        "drop key",
        "drop apple",
        "examine key",
        "examine apple",
        "eat apple",
        "insert apple into chest",
    }
    assert commands == expected
    assert "go north" not in commands and "open box" not in commands


def test_without_a_layout_a_bare_name_is_portable_and_no_key_fits() -> None:
    state = AFTER_TAKE.replace(
        "Exits: east, north (wooden door: closed)", "Exits: north (wooden door: locked)"
    )
    commands = admissible_commands(state, "") or []
    assert "take knife from table" in commands and "put key on table" in commands
    assert not any(c.startswith("unlock") for c in commands)
    assert admissible_commands("You are in a kitchen.", WORLD) is None


def test_a_move_answers_every_line_of_the_new_room() -> None:
    moved = AFTER_TAKE.replace("Room: kitchen", "Room: hall")
    assert state_changes(AFTER_TAKE, moved) == "\n".join(["Done.", *moved.split("\n")[1:4]])
    assert complete_state(AFTER_TAKE, state_changes(AFTER_TAKE, moved)) == moved


def _answering(*answers: str):  # type: ignore[no-untyped-def]
    """A scripted model giving these ``next_state`` answers in turn, with actions the domain must ignore."""
    from dreamgym_env import ScriptedBackend
    from dreamgym_env.experience.schema import ExperienceOutput

    outputs = [
        ExperienceOutput(reasoning="", next_state=a, admissible_actions=["fly"], done=False, success=False)
        for a in answers
    ]
    return ScriptedBackend(outputs)


def test_the_simulator_completes_change_answers_and_lists_the_commands_itself() -> None:
    import gymnasium as gym

    env = gym.make("DreamGym/TextWorld-v0", backend=_answering("Done.\nCarrying: knife"), top_k=0)
    state, info = env.reset(seed=3)
    before = parse_state(state)
    assert before is not None
    acting = [a for a in info["admissible_actions"] if a.split()[0] not in ("look", "inventory", "examine")]
    next_state, _, _, _, info = env.step(acting[0])
    after = parse_state(next_state)
    assert after is not None and after.result == "Done." and after.lines["Carrying"] == "knife"
    assert after.lines["Room"] == before.lines["Room"] and after.lines["Exits"] == before.lines["Exits"]
    assert info["admissible_actions"] == admissible_commands(
        next_state, any_key=True
    )  # no layout: no key known
    assert "drop knife" in info["admissible_actions"] and "fly" not in info["admissible_actions"]


def test_an_answer_the_domain_cannot_complete_is_asked_again() -> None:
    import gymnasium as gym

    env = gym.make(
        "DreamGym/TextWorld-v0", backend=_answering("Done.\nPocket: knife", "Nothing happens."), top_k=0
    )
    _, info = env.reset(seed=3)
    next_state, *_ = env.step("open chest")
    assert next_state.startswith("Nothing happens.\nRoom: ")
    assert env.unwrapped.backend.requests_received == 2  # type: ignore[attr-defined]


def test_steps_that_change_no_fact_are_answered_by_the_rules_without_a_request() -> None:
    import gymnasium as gym

    env = gym.make("DreamGym/TextWorld-v0", backend=_answering("Done.\nCarrying: knife"), top_k=0)
    first, info = env.reset(seed=3)
    before = parse_state(first)
    assert before is not None
    for action in ("look", "inventory", f"examine {before.lines['Here'].split(' (')[0].split(', ')[0]}"):
        state, reward, terminated, _, info = env.step(action)
        assert state == "\n".join(["Nothing happens.", *first.split("\n\n")[0].split("\n")])
        assert (reward, terminated, info["attempts"], info["answered_by"]) == (0.0, False, 0, "rule")
        assert info["admissible_actions"] == admissible_commands(state)
    assert env.unwrapped.backend.requests_received == 0  # type: ignore[attr-defined]
    env.step("take knife")  # anything else asks the model
    assert env.unwrapped.backend.requests_received == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("source", "replay_real", "replayed"),
    [("real", True, True), ("sim", True, False), ("real", False, False)],
)
def test_a_step_the_buffer_holds_a_real_transition_of_is_replayed(
    source: str, replay_real: bool, replayed: bool
) -> None:
    import gymnasium as gym

    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.records import Transition

    buffer = ReplayBuffer.open(":memory:")
    env = gym.make(
        "DreamGym/TextWorld-v0",
        backend=_answering("Done.\nCarrying: knife"),
        retriever=buffer,
        top_k=1,
        replay_real=replay_real,
        store_transitions="none",
    )
    first, info = env.reset(seed=3)
    task = env.unwrapped.task  # type: ignore[attr-defined]
    recorded = "\n".join(["Done.", *first.split("\n\n")[0].split("\n")[:-1], "Carrying: spoon"])
    buffer.add(
        Transition.of_step(
            task,
            episode_id="recorded",
            step=0,
            state=first,
            action="take spoon",
            next_state=recorded,
            reward=0.0,
            done=False,
            success=False,
            source=source,  # type: ignore[arg-type]
        )
    )
    state, _, _, _, info = env.step("take spoon")
    requests = env.unwrapped.backend.requests_received  # type: ignore[attr-defined]
    assert (state == recorded, info["answered_by"], requests) == (
        (True, "replay", 0) if replayed else (False, "model", 1)
    )


LAYOUT = """Map: kitchen: north hall, east pantry; hall: south kitchen; pantry: west kitchen
Room: kitchen | Exits: north (oak door: locked), east | Here: chest (closed), coin
Room: hall | Exits: south (oak door: locked) | Here: bed
Room: pantry | Exits: west | Here: nothing
Inside: chest: key
Keys: oak door: key"""

IN_KITCHEN = """Done.
Room: kitchen
Exits: north (oak door: open), east
Here: chest (closed)
Carrying: coin"""


def test_nearby_facts_give_the_rooms_behind_the_exits_with_the_doors_as_the_state_shows_them() -> None:
    assert nearby_facts(IN_KITCHEN, LAYOUT).splitlines() == [
        "north: Room: hall | Exits: south (oak door: open) | Here: bed",
        "east: Room: pantry | Exits: west | Here: nothing",
        "Inside: chest: key",
        "Keys: oak door: key",
    ]


def test_nearby_facts_for_an_action_keep_only_what_it_reaches() -> None:
    assert (
        nearby_facts(IN_KITCHEN, LAYOUT, action="go east")
        == "east: Room: pantry | Exits: west | Here: nothing"
    )
    assert nearby_facts(IN_KITCHEN, LAYOUT, action="open chest") == "Inside: chest: key"
    assert nearby_facts(IN_KITCHEN, LAYOUT, action="unlock oak door with key") == "Keys: oak door: key"
    assert nearby_facts(IN_KITCHEN, LAYOUT, action="look") == ""
    assert nearby_facts(IN_KITCHEN, LAYOUT, action="open chestnut box") == ""  # a name only as a whole word


def test_nearby_facts_show_a_room_as_the_episode_last_showed_it() -> None:
    in_pantry = "Done.\nRoom: pantry\nExits: west\nHere: coin\nCarrying: nothing"
    back = IN_KITCHEN.replace("Carrying: coin", "Carrying: nothing")
    facts = nearby_facts(back, LAYOUT, seen=[IN_KITCHEN, in_pantry])
    assert "east: Room: pantry | Exits: west | Here: coin" in facts.splitlines()
    assert nearby_facts("You are in a kitchen.", LAYOUT) == "" and nearby_facts(IN_KITCHEN, "") == ""


def test_a_compact_prompt_shows_the_nearby_layout_instead_of_the_whole_one() -> None:
    from dreamgym_env.domains import get_domain
    from dreamgym_env.experience.prompt import build_messages
    from dreamgym_env.records import Task

    domain = get_domain("textworld")
    task = Task(
        task_id="t",
        domain="textworld",
        instruction="take the key",
        metadata={"world": LAYOUT, "goal": "in(key, I)"},
    )
    facts = domain.describe_step(task, [], IN_KITCHEN, "go north")
    compact = build_messages(domain, task, [], [], IN_KITCHEN, "go north", style="compact", step_facts=facts)
    full = build_messages(domain, task, [], [], IN_KITCHEN, "go north", step_facts=facts)
    user = compact[1]["content"]
    assert "Map: " not in user and "goal: in(key, I)" in user and "north: Room: hall" in user
    assert "east: Room: pantry" not in user  # only the room this move enters
    assert "take the key" not in user  # the goal's facts stand for the quest's prose
    assert "Map: " in full[1]["content"] and "take the key" in full[1]["content"]
    assert len(compact[0]["content"]) < 100 < len(full[0]["content"])
