"""Losses by the rules of a TextWorld challenge family, for a dream that never sees the game's goal facts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dreamgym_env.domains import get_domain
from dreamgym_env.domains.textworld.families import (
    chain_map,
    family_lost,
    game_family,
    game_rooms,
    has_loss_rule,
)
from dreamgym_env.records import Step, Task

HUNT = (
    "Hey, thanks for coming over to the TextWorld today, there is something I need you to do for me. "
    "First off, if it's not too much trouble, I need you to venture west. And then, recover the loaf "
    "of bread from the trunk. Alright, thanks!"
)
SIMPLE = (
    "First stop, make sure that the chest drawer in the bedroom is opened. And then, take the bell "
    "pepper from the chest drawer. Then, put the bell pepper on the stove in the kitchen. And once "
    "you've done that, you win!"
)


def _state(here: str, carrying: str = "nothing", result: str = "Done.", room: str = "garage") -> str:
    return f"{result}\nRoom: {room}\nExits: east\nHere: {here}\nCarrying: {carrying}"


@pytest.mark.parametrize(
    ("uuid", "family"),
    [
        ("tw-treasure_hunter-0PFdcj-house-GP-6KNecjeyCXQYID9o", "tw-treasure_hunter"),
        ("tw-coin_collector-abc", "tw-coin_collector"),
        ("tw-simple-xyz", "tw-simple"),
        ("tw-b5sQIZFRUZUgFxUMFW-house-GP-G3n6F9mvF9DDFvlR", None),  # a custom quest
    ],
)
def test_the_family_is_read_from_the_metadata_beside_the_game(
    tmp_path: Path, uuid: str, family: str | None
) -> None:
    game = tmp_path / "g.z8"
    game.write_bytes(b"")
    (tmp_path / "g.json").write_text(json.dumps({"metadata": {"uuid": uuid}}))
    assert game_family(game) == family


@pytest.mark.parametrize(
    ("uuid", "rooms"),
    [
        # What `tw-make custom --world-size 5 --nb-objects 7 --quest-length 2` writes (GameOptions.uuid).
        ("tw-PoFqhWFZFkFjFnFPF6-house-GP-ekDZtbGXIbO5FKp8", 1),
        ("tw-treasure_hunter-0PFdcj-house-GP-6KNecjeyCXQYID9o", None),  # a challenge's game: its family
        ("tw-notahashid-house-GP-x", None),
        ("something else", None),
    ],
)
def test_a_custom_games_size_is_read_from_the_options_its_uuid_encodes(
    tmp_path: Path, uuid: str, rooms: int | None
) -> None:
    game = tmp_path / "g.z8"
    (tmp_path / "g.json").write_text(json.dumps({"metadata": {"uuid": uuid}}))
    assert game_rooms(game) == rooms


def test_a_game_without_readable_metadata_has_no_family(tmp_path: Path) -> None:
    assert game_family(tmp_path / "missing.z8") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert game_family(tmp_path / "bad.z8") is None


def test_a_treasure_hunter_loses_on_any_pickup_but_the_quests_object() -> None:
    before = _state("trunk (open, holds: loaf of bread), fly larva")
    wrong = _state("trunk (open, holds: loaf of bread)", carrying="fly larva")
    right = _state("trunk (open, empty), fly larva", carrying="loaf of bread")
    assert family_lost("tw-treasure_hunter", HUNT, [before, wrong]) is True
    assert family_lost("tw-treasure_hunter", HUNT, [before, right]) is False
    # Still carrying the wrong thing later is not a new loss: the step that picked it up lost.
    assert family_lost("tw-treasure_hunter", HUNT, [wrong, wrong]) is False


def test_tw_simple_loses_when_the_quests_food_is_eaten() -> None:
    holding = _state("chest drawer (open, empty)", carrying="bell pepper", room="bedroom")
    eaten = _state("chest drawer (open, empty)", room="bedroom")
    dropped = _state("bell pepper, chest drawer (open, empty)", room="bedroom")
    assert family_lost("tw-simple", SIMPLE, [holding, eaten]) is True
    assert family_lost("tw-simple", SIMPLE, [holding, dropped]) is False
    quest_is_eating = "First, take the apple. Then, eat the apple. That's it!"
    apple = _state("table", carrying="apple")
    assert family_lost("tw-simple", quest_is_eating, [apple, _state("table")]) is False


def test_families_without_a_rule_leave_losses_to_another_judge() -> None:
    before, after = _state("coin"), _state("nothing", carrying="coin")
    assert family_lost("tw-coin_collector", "pick up the coin.", [before, after]) is False
    assert has_loss_rule("tw-coin_collector") and not has_loss_rule("tw-cooking")
    assert family_lost(None, HUNT, [before, after]) is None
    assert family_lost("tw-cooking", HUNT, [before, after]) is None
    assert family_lost("tw-treasure_hunter", HUNT, ["You are in a garage.", after]) is None


def _judge(family: str | None, state: str, action: str, next_state: str):
    metadata = {"family": family} if family else {}
    task = Task(task_id="t", domain="textworld", instruction=HUNT, metadata=metadata)
    start = _state("trunk (closed)", result="", room="shower")
    return get_domain("textworld").judge_step(
        task, [Step(state=start, action="go west")], state, action, next_state
    )


def test_a_learned_dream_pays_and_ends_the_familys_loss_whatever_the_model_wrote() -> None:
    before = _state("trunk (open, holds: loaf of bread), fly larva")
    wrong = _state("trunk (open, holds: loaf of bread)", carrying="fly larva")
    outcome = _judge("tw-treasure_hunter", before, "take fly larva", wrong)
    assert outcome is not None and outcome.done and not outcome.success
    assert outcome.next_state.startswith("You lost.\n")
    # A loss the model claims that the family's rule does not give reads "Done." and goes on.
    claimed = _judge("tw-treasure_hunter", wrong, "look", wrong.replace("Done.", "You lost.", 1))
    assert claimed is not None and not claimed.done and claimed.next_state.startswith("Done.\n")
    # The quest's own object wins, as the instruction says.
    right = _state("trunk (open, empty), fly larva", carrying="loaf of bread")
    won = _judge("tw-treasure_hunter", before, "take loaf of bread from trunk", right)
    assert won is not None and won.success and won.done
    # No family: the model's result line rules a loss, as before.
    unknown = _judge(None, before, "take fly larva", wrong.replace("Done.", "You lost.", 1))
    assert unknown is not None and unknown.done and unknown.next_state.startswith("You lost.\n")
    assert not _judge(None, before, "take fly larva", wrong).done


def test_a_coin_collectors_dream_enters_dead_ends_off_the_walkthrough() -> None:
    assert chain_map("tw-coin_collector") and not chain_map("tw-treasure_hunter") and not chain_map(None)
    coins = "First, head east. And then, pick up the coin from the floor of the attic. That's it!"
    start = "Room: cellar\nExits: east, south\nHere: nothing\nCarrying: nothing\n\nYour task is to: " + coins

    def pattern(family: str | None) -> str:
        metadata = {"family": family} if family else {}
        task = Task(task_id="t", domain="textworld", instruction=coins, metadata=metadata)
        found = get_domain("textworld").answer_pattern(task, [], start, "go south")
        assert found is not None
        return found

    two_ways = "Done.\nRoom: pantry\nExits: north, west\nHere: nothing"
    assert re.fullmatch(pattern(None), two_ways)
    assert not re.fullmatch(pattern("tw-coin_collector"), two_ways)
    assert re.fullmatch(pattern("tw-coin_collector"), "Done.\nRoom: pantry\nExits: north\nHere: nothing")


def test_a_custom_dream_invents_no_more_rooms_than_the_map_has() -> None:
    quest = "First, go east. Then, take the key from the floor of the den. That's it!"
    start = "Room: hall\nExits: east, north\nHere: nothing\nCarrying: nothing\n\nYour task is to: " + quest

    def pattern(rooms: int | None, action: str) -> str:
        metadata = {"rooms": rooms} if rooms else {}
        task = Task(task_id="t", domain="textworld", instruction=quest, metadata=metadata)
        found = get_domain("textworld").answer_pattern(task, [], start, action)
        assert found is not None
        return found

    branching = "Done.\nRoom: den\nExits: south, west\nHere: key"
    dead_end = "Done.\nRoom: den\nExits: west\nHere: key"
    assert re.fullmatch(pattern(None, "go east"), branching)
    # Three rooms: the den and one more behind the hall's north exit; the den can open no way on.
    assert not re.fullmatch(pattern(3, "go east"), branching)
    assert re.fullmatch(pattern(3, "go east"), dead_end)
    # Four rooms leave one to find behind the den.
    assert re.fullmatch(pattern(4, "go east"), branching)
    # Off the walkthrough, the same bound.
    assert re.fullmatch(pattern(4, "go north"), "Done.\nRoom: attic\nExits: south, east\nHere: nothing")
    assert not re.fullmatch(pattern(3, "go north"), "Done.\nRoom: attic\nExits: south, east\nHere: nothing")


def test_a_stored_transition_keeps_the_family_so_a_replayed_step_is_judged_alike() -> None:
    domain = get_domain("textworld")
    task = Task(
        task_id="t",
        domain="textworld",
        instruction=HUNT,
        metadata={"family": "tw-treasure_hunter", "world": "w", "x": 1},
    )
    assert domain.stored_task_metadata(task) == {"world": "w", "family": "tw-treasure_hunter"}
    assert domain.learned_view(task).metadata == {"family": "tw-treasure_hunter", "x": 1}
