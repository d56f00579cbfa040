"""The outcomes a TextWorld step can have, written out from the state and a layout."""

from __future__ import annotations

import re

import pytest

from dreamgym_env.domains.textworld.outcomes import step_outcomes, step_pattern
from dreamgym_env.domains.textworld.plan import Reveal
from dreamgym_env.domains.textworld.state import complete_state

KITCHEN = "\n".join(
    [
        "Done.",
        "Room: kitchen",
        "Exits: east, north (oak door: closed)",
        "Here: chest (open, holds: apple, key), coin, crate (closed), table (on: knife)",
        "Carrying: lamp",
    ]
)


def success(state: str, action: str, world: str = "", seen: tuple[str, ...] = ()) -> str:
    """The next state of the first success outcome (``Done.``)."""
    outcomes = step_outcomes(state, action, world, seen)
    assert outcomes is not None and len(outcomes) == 4, outcomes
    assert outcomes[0] == "Nothing happens."
    assert [o.split("\n")[0] for o in outcomes[1:]] == ["Done.", "You won.", "You lost."]
    return complete_state(state, outcomes[1])


def line(state: str, key: str) -> str:
    return next(row for row in state.split("\n") if row.startswith(f"{key}: "))[len(key) + 2 :]


def test_take_from_a_container_empties_it_and_carries_the_thing_in_name_order() -> None:
    after = success(KITCHEN, "take key from chest")
    assert line(after, "Here") == "chest (open, holds: apple), coin, crate (closed), table (on: knife)"
    assert line(after, "Carrying") == "key, lamp"
    last = success(after, "take apple from chest")
    assert line(last, "Here").startswith("chest (open, empty), ")


def test_a_supporter_left_bare_reads_as_its_name_and_takes_things_again() -> None:
    after = success(KITCHEN, "take knife from table")
    assert line(after, "Here").endswith("table")
    back = success(after, "put knife on table")
    assert line(back, "Here").endswith("table (on: knife)")
    assert line(back, "Carrying") == "lamp"


def test_drop_insert_and_eat_move_what_is_carried() -> None:
    assert line(success(KITCHEN, "drop lamp"), "Here").endswith(
        "coin, crate (closed), lamp, table (on: knife)"
    )
    assert line(success(KITCHEN, "insert lamp into chest"), "Here").startswith(
        "chest (open, holds: apple, key, lamp)"
    )
    assert line(success(KITCHEN, "eat lamp"), "Carrying") == "nothing"


def test_doors_and_containers_open_close_lock_and_unlock() -> None:
    assert line(success(KITCHEN, "open oak door"), "Exits") == "east, north (oak door: open)"
    closed = success(KITCHEN, "close chest")
    assert line(closed, "Here").startswith("chest (closed), ")
    reopened = success(closed, "open chest", seen=(KITCHEN,))  # the episode saw what it held
    assert line(reopened, "Here") == line(KITCHEN, "Here")
    with_key = KITCHEN.replace("Carrying: lamp", "Carrying: brass key")
    locked = success(with_key, "lock oak door with brass key")
    assert line(locked, "Exits") == "east, north (oak door: locked)"
    assert (
        line(success(locked, "unlock oak door with brass key"), "Exits") == "east, north (oak door: closed)"
    )


def test_a_container_never_seen_open_is_revealing_unless_the_layout_says() -> None:
    assert step_outcomes(KITCHEN, "open crate", "") is None
    world = "Map: kitchen: east hall\nInside: crate: ruby"
    assert line(success(KITCHEN, "open crate", world), "Here").startswith(
        "chest (open, holds: apple, key), coin, crate (open, holds: ruby)"
    )
    # The game's whole layout lists every closed container that holds something: one it omits is empty.
    opened = step_outcomes(KITCHEN, "open crate", "Map: kitchen: east hall", whole_layout=True)
    assert opened is not None and "crate (open, empty)" in opened[1]


def test_a_move_is_known_only_into_a_room_the_layout_has() -> None:
    assert step_outcomes(KITCHEN, "go east", "") is None
    hall = "Done.\nRoom: hall\nExits: west\nHere: rug\nCarrying: lamp"
    shown = [KITCHEN.replace("Done.\n", ""), hall]  # the episode went east, then came back
    back_in_kitchen = "Done.\n" + KITCHEN.split("\n", 1)[1]
    world = "Map: kitchen: east hall; hall: west kitchen"
    after = success(back_in_kitchen, "go east", world, tuple(shown))
    assert line(after, "Room") == "hall" and line(after, "Here") == "rug"


@pytest.mark.parametrize(
    "action",
    [
        "take ruby",
        "take knife from chest",
        "drop apple",
        "put lamp on crate",
        "insert lamp into crate",
        "open chest",
        "close crate",
        "unlock crate with lamp",
        "go north",
        "go west",
    ],
)
def test_a_command_that_cannot_succeed_has_one_outcome_nothing_happens(action: str) -> None:
    assert step_outcomes(KITCHEN, action, "") == ["Nothing happens."]


def test_no_list_for_a_prose_state_or_an_unmodelled_command() -> None:
    assert step_outcomes("You are in a kitchen.", "take apple", "") is None
    assert step_outcomes(KITCHEN, "cook apple with stove", "") is None


def test_a_move_into_an_unknown_room_must_have_the_way_back() -> None:
    pattern = step_pattern(KITCHEN, "go east", "")
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: hall\nExits: north (oak door: closed), west\nHere: rug")
    assert re.fullmatch(pattern, "You won.\nRoom: hall\nExits: west\nHere: nothing")
    assert not re.fullmatch(pattern, "Done.\nRoom: hall\nExits: north\nHere: rug")  # no way back
    # The way in had no door: nor has the way back.
    assert not re.fullmatch(pattern, "Done.\nRoom: hall\nExits: north, west (oak door: open)\nHere: rug")
    assert not re.fullmatch(pattern, "Done.\nRoom: hall.\nExits: west\nHere: rug")  # no dot in a name
    assert not re.fullmatch(pattern, "Nothing happens.")  # the exit is open: the move succeeds


def test_the_way_back_is_the_door_the_move_went_through() -> None:
    porch = "Done.\nRoom: porch\nExits: east (screen door: open), west\nHere: nothing\nCarrying: nothing"
    pattern = step_pattern(porch, "go east", "")
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: yard\nExits: south, west (screen door: open)\nHere: bbq")
    assert not re.fullmatch(pattern, "Done.\nRoom: yard\nExits: south, west\nHere: bbq")
    assert not re.fullmatch(pattern, "Done.\nRoom: yard\nExits: west (wooden door: open)\nHere: bbq")
    assert not re.fullmatch(pattern, "Done.\nRoom: yard\nExits: west (screen door: closed)\nHere: bbq")
    # One door joins two rooms through one exit of each.
    assert not re.fullmatch(
        pattern, "Done.\nRoom: yard\nExits: east (screen door: open), west (screen door: open)\nHere: bbq"
    )
    assert re.fullmatch(
        pattern, "Done.\nRoom: yard\nExits: east (gate: closed), west (screen door: open)\nHere: bbq"
    )


def test_a_new_room_lists_nothing_the_instruction_places_in_another_room() -> None:
    den = "Done.\nRoom: den\nExits: east\nHere: nothing\nCarrying: nothing"
    pattern = step_pattern(den, "go east", "", reveal=Reveal(elsewhere=frozenset({"coin"})))
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: hall\nExits: west\nHere: nothing")
    assert re.fullmatch(pattern, "Done.\nRoom: hall\nExits: west\nHere: rug")
    assert not re.fullmatch(pattern, "Done.\nRoom: hall\nExits: west\nHere: coin")
    assert not re.fullmatch(pattern, "Done.\nRoom: hall\nExits: west\nHere: rug, coin")


def test_opening_an_unknown_container_changes_only_its_listing() -> None:
    pattern = step_pattern(KITCHEN, "open crate", "")
    assert pattern is not None
    here = "chest (open, holds: apple, key), coin, crate ({}), table (on: knife)"
    assert re.fullmatch(pattern, "Done.\nHere: " + here.format("open, holds: ruby, map"))
    assert re.fullmatch(pattern, "Done.\nHere: " + here.format("open, empty"))
    assert not re.fullmatch(pattern, "Done.\nHere: " + here.format("closed"))
    assert not re.fullmatch(pattern, "Done.\nHere: coin, crate (open, empty), table (on: knife)")


def test_no_pattern_where_the_outcomes_are_written_out() -> None:
    assert step_pattern(KITCHEN, "take coin", "") is None
    assert step_pattern(KITCHEN, "look", "") is None
