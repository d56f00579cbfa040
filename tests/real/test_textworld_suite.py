"""The TextWorld game suite and the abstract TextWorld state."""

from __future__ import annotations

from collections import Counter

import pytest

from dreamgym_env.domains.textworld import render_textworld_start, render_textworld_state
from dreamgym_env.domains.textworld.suite import HELDOUT_SEED_OFFSET, build_suite, load_suite, recipe_for

ROOM = "-= Kitchen =-\nYou are in a kitchen.\n\n\n\nThere is an exit to the east."


def test_state_adds_room_and_inventory_unless_the_feedback_is_them():
    after_take = render_textworld_state("You pick up the key.\n\n", ROOM, "You are carrying: a key.")
    assert after_take == (
        "You pick up the key.\n\n-= Kitchen =-\nYou are in a kitchen.\n\nThere is an exit to the east."
        "\n\nYou are carrying: a key."
    )
    after_look = render_textworld_state(ROOM + "\n\n", ROOM, "You are carrying nothing.")
    assert after_look.count("-= Kitchen =-") == 1 and after_look.endswith("You are carrying nothing.")
    after_inventory = render_textworld_state("You are carrying: a key.", ROOM, "You are carrying: a key.")
    assert after_inventory.count("You are carrying") == 1
    start = render_textworld_start(ROOM, "Take the  key.", "You are carrying nothing.")
    assert start.endswith("You are carrying nothing.\n\nYour task is to: Take the key.")


def test_recipes_are_a_pure_function_of_the_seed_and_cover_every_generator():
    assert [recipe_for(s) for s in range(50)] == [recipe_for(s) for s in range(50)]
    kinds = Counter(recipe_for(s)[0] for s in range(400))
    assert set(kinds) == {"custom", "tw-treasure_hunter", "tw-coin_collector", "tw-simple"}
    sizes = {recipe_for(s)[1]["nb_rooms"] for s in range(400) if recipe_for(s)[0] == "custom"}
    assert sizes == {1, 2, 3, 4, 5, 6}


@pytest.mark.real
def test_suite_builds_reproducibly_with_disjoint_splits(tmp_path):
    pytest.importorskip("textworld")
    suite = build_suite(tmp_path / "a", train_games=2, heldout_games=1, seed=5, workers=1)
    assert [g.seed for g in suite.train] == [5, 6]
    assert all(g.seed >= 5 + HELDOUT_SEED_OFFSET for g in suite.heldout)
    again = load_suite(tmp_path / "a")
    assert again.games == suite.games
    assert suite.split_of(suite.heldout[0].path) == "heldout"
    other = build_suite(tmp_path / "b", train_games=2, heldout_games=1, seed=5, workers=1)
    assert [g.recipe for g in other.games] == [g.recipe for g in suite.games]


@pytest.mark.real
def test_a_suite_of_one_family(tmp_path):
    pytest.importorskip("textworld")
    suite = build_suite(
        tmp_path,
        train_games=2,
        heldout_games=1,
        seed=7,
        workers=1,
        recipe=("tw-coin_collector", {"level": 2}),
    )
    assert [g.recipe for g in suite.games] == ["tw-coin_collector L2"] * 3
    assert load_suite(tmp_path).games == suite.games
