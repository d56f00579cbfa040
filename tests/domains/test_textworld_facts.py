"""The canonical TextWorld state, rendered from world facts (no TextWorld install needed)."""

from __future__ import annotations

from dreamgym_env.domains.textworld.facts import (
    Fact,
    render_facts_state,
    render_goal,
    render_world,
    step_result,
)


def fact(pred: str, *args: str) -> Fact:
    return (pred, tuple((a.split(":")[0], a.split(":")[1]) for a in args))


WORLD = [
    fact("at", "P:P", "kitchen:r"),
    fact("at", "chest:c", "kitchen:r"),
    fact("at", "table:s", "kitchen:r"),
    fact("at", "coin:o", "kitchen:r"),
    fact("closed", "chest:c"),
    fact("in", "key:k", "chest:c"),
    fact("on", "apple:f", "table:s"),
    fact("in", "mug:o", "I:I"),
    fact("north_of", "hall:r", "kitchen:r"),
    fact("south_of", "kitchen:r", "hall:r"),
    fact("east_of", "pantry:r", "kitchen:r"),
    fact("west_of", "kitchen:r", "pantry:r"),
    fact("link", "kitchen:r", "oak door:d", "hall:r"),
    fact("locked", "oak door:d"),
    fact("match", "key:k", "oak door:d"),
    fact("at", "bed:s", "hall:r"),
]


def test_a_state_lists_room_exits_things_and_inventory_and_hides_closed_contents() -> None:
    assert render_facts_state(WORLD, "Done.") == (
        "Done.\nRoom: kitchen\nExits: north (oak door: locked), east\n"
        "Here: chest (closed), coin, table (on: apple)\nCarrying: mug"
    )


def test_the_same_world_renders_the_same_whatever_the_fact_order() -> None:
    assert render_facts_state(reversed(WORLD)) == render_facts_state(WORLD)


def test_an_open_container_shows_what_it_holds_or_that_it_is_empty() -> None:
    opened = [f for f in WORLD if f != fact("closed", "chest:c")] + [fact("open", "chest:c")]
    assert "chest (open, holds: key)" in render_facts_state(opened)
    emptied = [f for f in opened if f[0] != "in" or f[1][0][0] != "key"] + [fact("in", "key:k", "I:I")]
    state = render_facts_state(emptied)
    assert "chest (open, empty)" in state and state.endswith("Carrying: key, mug")


def test_the_first_state_ends_with_the_quest() -> None:
    state = render_facts_state(WORLD, quest="open  the door.")
    assert state.endswith("\n\nYour task is to: open the door.") and not state.startswith("Done.")


def test_step_results_read_the_facts() -> None:
    moved = [f for f in WORLD if f[0] != "at" or f[1][0][0] != "P"] + [fact("at", "P:P", "hall:r")]
    assert step_result(WORLD, list(reversed(WORLD))) == "Nothing happens."
    assert step_result(WORLD, moved) == "Done."
    assert step_result(WORLD, WORLD, won=True) == "You won."
    assert step_result(WORLD, moved, lost=True) == "You lost."


def test_the_world_shows_what_the_agent_cannot_see_in_the_states_own_words() -> None:
    assert render_world(WORLD).splitlines() == [
        "Map: kitchen: north hall, east pantry; hall: south kitchen; pantry: west kitchen",
        "Room: kitchen | Exits: north (oak door: locked), east | Here: chest (closed), coin, table (on: apple)",
        "Room: hall | Exits: south (oak door: locked) | Here: bed",
        "Room: pantry | Exits: west | Here: nothing",
        "Inside: chest: key",
        "Keys: oak door: key",
        "Kinds: supporters: bed, table; food: apple",
        "Carrying at start: mug",
    ]


def test_a_goal_has_a_line_per_quest_and_keeps_the_conditions_that_change() -> None:
    win = [fact("at", "P:P", "hall:r"), fact("match", "key:k", "oak door:d"), fact("open", "oak door:d")]
    other = [fact("in", "key:k", "I:I")]
    assert render_goal([[win, win, other], [other], []]) == (
        "at(P, hall); open(oak door) or in(key, I)\nin(key, I)"
    )
