"""The quest's instruction as a plan, and the revealing answers it shapes in a learned dream."""

from __future__ import annotations

import re

import pytest

from dreamgym_env.domains.textworld.outcomes import _name_except, step_pattern
from dreamgym_env.domains.textworld.plan import Reveal, instruction_plan, reveal_needs
from dreamgym_env.domains.textworld.state import dream_layout

TREASURE = (
    "Welcome to TextWorld! Here is how to play! First step, head north. Once you manage that, make "
    "absolutely sure that the passageway is opened. And then, make an attempt to go to the west. And "
    "then, attempt to go west. And then, doublecheck that the cabinet in the bathroom is ajar. Then, "
    "take the pizza from the cabinet. Once that's all handled, you can stop!"
)
START = "Room: scullery\nExits: north (portal: open), south, west\nHere: nothing\nCarrying: nothing"
HALL = "Done.\nRoom: hall\nExits: south, west (passageway: closed)\nHere: nothing\nCarrying: nothing"


def test_the_plan_lists_moves_and_commands_in_order() -> None:
    assert [str(step) for step in instruction_plan(TREASURE)] == [
        "go north",
        "open passageway",
        "go west",
        "go west",
        "open cabinet in bathroom",
        "carried pizza from cabinet",
    ]


def test_a_command_after_you_could_is_read() -> None:
    text = (
        "First, it would be a great idea if you could make sure that the box inside the bathroom is unlocked."
    )
    assert [str(step) for step in instruction_plan(text)] == ["unlocked box in bathroom"]


def test_flavour_is_left_out() -> None:
    assert instruction_plan("Welcome to TextWorld! Here is your task for today. That's it!") == ()


def test_the_walkthroughs_next_room_keeps_its_way_on_and_door() -> None:
    reveal = reveal_needs(TREASURE, [START], dream_layout([START], []), "go north")
    assert reveal.room is not None
    assert reveal.room.exits == {"south": None, "west": ("passageway", "closed")}
    assert "scullery" in reveal.avoid and "bathroom" in reveal.avoid  # named elsewhere by the text
    pattern = step_pattern(START, "go north", "", [], reveal=reveal)
    assert pattern is not None
    way_back = "south (portal: open)"  # the portal the move went through, from the other side
    assert re.fullmatch(
        pattern, f"Done.\nRoom: hall\nExits: {way_back}, west (passageway: closed)\nHere: nothing"
    )
    # No way on, the door left out, the way back without its portal, or a name another room has.
    assert not re.fullmatch(pattern, f"Done.\nRoom: hall\nExits: {way_back}\nHere: nothing")
    assert not re.fullmatch(pattern, f"Done.\nRoom: hall\nExits: {way_back}, west\nHere: nothing")
    assert not re.fullmatch(
        pattern, "Done.\nRoom: hall\nExits: south, west (passageway: closed)\nHere: nothing"
    )
    assert not re.fullmatch(
        pattern, f"Done.\nRoom: scullery\nExits: {way_back}, west (passageway: closed)\nHere: nothing"
    )


def test_a_move_off_the_walkthrough_only_takes_a_new_name() -> None:
    reveal = reveal_needs(TREASURE, [START], dream_layout([START], []), "go west")
    assert reveal.room is None
    pattern = step_pattern(START, "go west", "", [], reveal=reveal)
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: den\nExits: east\nHere: sofa")
    assert not re.fullmatch(pattern, "Done.\nRoom: bathroom\nExits: east\nHere: sofa")


def test_the_named_room_at_the_end_holds_what_the_text_takes_from_it() -> None:
    open_hall = HALL.replace("passageway: closed", "passageway: open")
    corridor = "Done.\nRoom: corridor\nExits: east, west\nHere: nothing\nCarrying: nothing"
    states = [START, HALL, open_hall, corridor]
    actions = ["go north", "open passageway", "go west"]
    reveal = reveal_needs(TREASURE, states, dream_layout(states, actions), "go west")
    assert reveal.room is not None and reveal.room.name == "bathroom"
    pattern = step_pattern(corridor, "go west", "", states[:-1], reveal=reveal)
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: bathroom\nExits: east\nHere: cabinet (closed), sink")
    assert not re.fullmatch(pattern, "Done.\nRoom: bathroom\nExits: east\nHere: sink")
    assert not re.fullmatch(pattern, "Done.\nRoom: bathroom\nExits: east\nHere: cabinet (closed), nothing")
    # Then opening the cabinet there shows the pizza.
    bathroom = "Done.\nRoom: bathroom\nExits: east\nHere: cabinet (closed)\nCarrying: nothing"
    states = [*states, bathroom]
    actions = [*actions, "go west"]
    reveal = reveal_needs(TREASURE, states, dream_layout(states, actions), "open cabinet")
    assert reveal.contents == ("pizza",)
    pattern = step_pattern(bathroom, "open cabinet", "", states[:-1], reveal=reveal)
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nHere: cabinet (open, holds: pizza)")
    assert re.fullmatch(pattern, "Done.\nHere: cabinet (open, holds: pizza, fork)")
    assert not re.fullmatch(pattern, "Done.\nHere: cabinet (open, empty)")
    assert not re.fullmatch(pattern, "Done.\nHere: cabinet (open, holds: pizza, pizza)")


def test_a_revisited_walkthrough_room_is_found_on_the_dreams_map() -> None:
    text = "First, go west. Then, take the tablet from the desk inside the den. And then, go east. Then, go north."
    start = "Room: kitchen\nExits: north, west\nHere: nothing\nCarrying: nothing"
    den = "Done.\nRoom: den\nExits: east\nHere: desk (on: tablet)\nCarrying: nothing"
    back = "Done.\nRoom: kitchen\nExits: north, west\nHere: nothing\nCarrying: tablet"
    states, actions = [start, den, back], ["go west", "go east"]
    reveal = reveal_needs(text, states, dream_layout(states, actions), "go north")
    assert reveal.room is not None and reveal.room.exits == {"south": None}
    assert "den" in reveal.avoid and "kitchen" in reveal.avoid


@pytest.mark.parametrize(
    ("starting", "word", "allowed"),
    [
        (False, "kitchen", False),
        (False, "kitchens", True),
        (False, "kit", True),
        (True, "kitchens", False),
        (True, "kitche", True),
        (True, "attic", True),
        # Read back, a name loses its spaces at either end: "kitchen " would be the kitchen again.
        (False, "kitchen ", False),
        (False, "kitchen.", False),
        (False, " attic", False),
        (False, "kit ", False),
        (False, "bath room", True),
        (False, "kit chen", True),
    ],
)
def test_a_name_except_others(starting: bool, word: str, allowed: bool) -> None:
    pattern = _name_except(frozenset({"kitchen", "bath"}), starting=starting)
    assert bool(re.fullmatch(pattern, word)) is allowed
    assert "(?:" not in pattern and "(|" not in pattern  # forms vLLM's regex grammar reads


def test_no_reveal_leaves_the_room_free() -> None:
    pattern = step_pattern(START, "go south", "", [], reveal=Reveal())
    assert pattern is not None
    assert re.fullmatch(pattern, "You won.\nRoom: scullery annex\nExits: north\nHere: nothing")


def test_a_thing_shows_the_state_its_first_command_finds() -> None:
    text = (
        "First, head east. If you can succeed at that, close the cake scented chest. After shutting the cake "
        "scented chest, Deposit the cake scented passkey into the cake scented chest to lock it."
    )
    reveal = reveal_needs(text, [START.replace("west", "east")], "", "go east")
    assert reveal.room is not None
    chest = reveal.room.things["cake scented chest"]
    assert (chest.kind, chest.state) == ("container", "open")
    pattern = step_pattern(START.replace("west", "east"), "go east", "", [], reveal=reveal)
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: den\nExits: west\nHere: cake scented chest (open, empty)")
    assert not re.fullmatch(pattern, "Done.\nRoom: den\nExits: west\nHere: cake scented chest (locked)")


def test_an_opened_container_shows_a_thing_or_two() -> None:
    room = "Room: den\nExits: none\nHere: box (closed)\nCarrying: nothing"
    pattern = step_pattern(room, "open box", "", [], reveal=Reveal())
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nHere: box (open, empty)")
    assert re.fullmatch(pattern, "Done.\nHere: box (open, holds: apple, fork)")
    assert not re.fullmatch(pattern, "Done.\nHere: box (open, holds: apple, fork, apple, fork)")
    assert not re.fullmatch(pattern, "Done.\nHere: box (open, holds: nothing)")


COINS = (
    "First, head east. Then, travel north. And then, pick up the coin from the floor of the attic. That's it!"
)
END = "Room: cellar\nExits: east\nHere: nothing\nCarrying: nothing"


def test_in_a_chain_the_walkthroughs_rooms_list_only_the_way_back_and_on() -> None:
    reveal = reveal_needs(COINS, [END], dream_layout([END], []), "go east", chain=True)
    assert reveal.room is not None and reveal.extra_exits == 0
    pattern = step_pattern(END, "go east", "", [], reveal=reveal)
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: hall\nExits: north, west\nHere: nothing")
    assert not re.fullmatch(pattern, "Done.\nRoom: hall\nExits: north, south, west\nHere: nothing")
    # A first room with an exit off the walkthrough: the game hangs dead ends off its chain.
    forked = END.replace("Exits: east", "Exits: east, south")
    branching = reveal_needs(COINS, [forked], dream_layout([forked], []), "go east", chain=True)
    assert branching.extra_exits == 1
    # Not a chain: any number.
    assert reveal_needs(COINS, [END], dream_layout([END], []), "go east").extra_exits is None


def test_in_a_chain_a_room_off_the_walkthrough_is_a_dead_end() -> None:
    forked = END.replace("Exits: east", "Exits: east, south")
    reveal = reveal_needs(COINS, [forked], dream_layout([forked], []), "go south", chain=True)
    assert reveal.room is None and reveal.extra_exits == 0
    pattern = step_pattern(forked, "go south", "", [], reveal=reveal)
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: pantry\nExits: north\nHere: nothing")
    assert not re.fullmatch(pattern, "Done.\nRoom: pantry\nExits: north, west\nHere: nothing")
    # An instruction that names no move: nothing to be off, the room is free.
    free = reveal_needs("Pick up the coin.", [forked], dream_layout([forked], []), "go south", chain=True)
    assert free.extra_exits is None


def test_the_served_grammar_reads_the_name_pattern_as_python_does() -> None:
    """vLLM decodes with xgrammar: a name it lets through that Python's reading refuses is a room twice."""
    xgrammar = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    pattern = _name_except(frozenset({"salondue", "salondue?", "living room"}))
    grammar = xgrammar.Grammar.from_regex(pattern)
    for word in (
        "salondue",
        "salondue?",
        "salondue ",
        "salondue. ",
        "living room",
        "living ",
        "salon",
        "hall 2",
    ):
        assert _is_grammar_accept_string(grammar, word) is bool(re.fullmatch(pattern, word)), word


def test_the_walkthroughs_way_on_has_no_door_to_open_unless_the_text_opens_one() -> None:
    text = "First, go north. Then, go north. Then, take the coin from the floor of the attic."
    start = "Room: cellar\nExits: north\nHere: nothing\nCarrying: nothing"
    reveal = reveal_needs(text, [start], dream_layout([start], []), "go north")
    assert reveal.room is not None and reveal.room.exits["north"] == ("", "open")
    pattern = step_pattern(start, "go north", "", [], reveal=reveal)
    assert pattern is not None
    assert re.fullmatch(pattern, "Done.\nRoom: hall\nExits: north, south\nHere: nothing")
    assert re.fullmatch(pattern, "Done.\nRoom: hall\nExits: north (gate: open), south\nHere: nothing")
    # A closed door the text never opens would stop the walkthrough in the dream.
    assert not re.fullmatch(pattern, "Done.\nRoom: hall\nExits: north (gate: closed), south\nHere: nothing")
