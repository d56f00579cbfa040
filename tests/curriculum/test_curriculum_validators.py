import numpy as np
import pytest

from dreamgym_env.curriculum.formats import GENERIC_FORMAT, get_format
from dreamgym_env.curriculum.validators import (
    check_instruction,
    get_validator,
    register_validator,
    validate_task,
)
from dreamgym_env.domains import BUILTIN_DOMAINS, get_domain
from dreamgym_env.records import Task


@pytest.mark.parametrize("domain", sorted(BUILTIN_DOMAINS))
def test_every_seed_task_passes(domain):
    for task in get_domain(domain).seed_tasks():
        assert validate_task(task) is None, task.task_id


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "characters"),
        ("ok", "characters"),
        ("buy\nshoes now please", "line breaks"),
        ("Ġ ĠĊĠ ĠĠĠ Ċ ĊĠ", "not words"),
        ("xkqzt brrmp vvvtk wwtkz shoes", "without vowels"),
        ("the the the the the the the shoes", "repeats"),
        ("1234 5678 91011 1213 shoes", "numbers or symbols"),
        ("a supercalifragilisticexpialidociouslyyy item to buy", "letter word"),
    ],
)
def test_unreadable_instructions_are_refused(text, fragment):
    assert fragment in check_instruction(text)


def _webshop(instruction, **meta):
    base = {"attributes": ["waterproof"], "options": ["blue"], "price_upper": 50.0, "category": "fashion"}
    return Task(task_id="w", domain="webshop", instruction=instruction, metadata={**base, **meta})


GOOD_SHOP = "i want a waterproof rain jacket in blue, and price lower than 50.00 dollars"


@pytest.mark.parametrize(
    "meta, instruction, fragment",
    [
        ({}, GOOD_SHOP, None),
        ({"attributes": []}, GOOD_SHOP, "attributes has 0 entries"),
        ({"attributes": ["fleece lined"]}, GOOD_SHOP, "does not state the attributes"),
        ({"options": ["size 12"]}, GOOD_SHOP, "does not state the options"),
        ({"price_upper": -5}, GOOD_SHOP, "not a plausible limit"),
        ({"price_upper": "cheap"}, GOOD_SHOP, "must be a number"),
        ({"price_upper": 40.0}, GOOD_SHOP, "differs from price_upper"),
        ({}, "i want a waterproof rain jacket in blue under budget", "states no price limit"),
        ({"category": "weapons"}, GOOD_SHOP, "unknown category"),
    ],
)
def test_webshop_validator(meta, instruction, fragment):
    reason = validate_task(_webshop(instruction, **meta))
    assert reason is None if fragment is None else fragment in reason


def _alf(task_type, obj, target, instruction):
    key = "lamp" if task_type == "look_at_obj_in_light" else "receptacle"
    return Task(
        task_id="a",
        domain="alfworld",
        instruction=instruction,
        metadata={"task_type": task_type, "object": obj, key: target},
    )


@pytest.mark.parametrize(
    "args, fragment",
    [
        (
            ("pick_heat_then_place_in_recep", "egg", "countertop", "heat some egg and put it in countertop."),
            None,
        ),
        (("pick_two_obj_and_place", "book", "desk", "put two book in desk."), None),
        (("look_at_obj_in_light", "cd", "floorlamp", "look at cd under the floorlamp."), None),
        (("pick_and_fly", "egg", "countertop", "put a egg in countertop."), "not one of ALFWorld's six"),
        (
            ("pick_and_place_simple", "dragon", "countertop", "put a dragon in countertop."),
            "not an ALFWorld object",
        ),
        (
            ("pick_and_place_simple", "apple", "spaceship", "put a apple in spaceship."),
            "not an ALFWorld receptacle",
        ),
        (
            ("pick_heat_then_place_in_recep", "book", "desk", "heat some book and put it in desk."),
            "cannot be heated",
        ),
        (
            ("pick_and_place_simple", "apple", "coffeemachine", "put a apple in coffeemachine."),
            "does not hold",
        ),
        (("pick_and_place_simple", "pillow", "drawer", "put a pillow in drawer."), "does not fit"),
        (
            ("pick_heat_then_place_in_recep", "potato", "sofa", "heat some potato and put it in sofa."),
            "no ALFWorld room",
        ),
        (("look_at_obj_in_light", "book", "candle", "look at book under the candle."), "lamp"),
        (
            ("pick_and_place_simple", "apple", "fridge", "please put the fruit away somewhere"),
            "not in an ALFWorld goal",
        ),
        (("pick_and_place_simple", "apple", "fridge", "put a tomato in fridge."), "reads as"),
    ],
)
def test_alfworld_validator(args, fragment):
    reason = validate_task(_alf(*args))
    assert reason is None if fragment is None else fragment in reason, reason


def _arena(instruction, sites=("gitlab",), start="__GITLAB__", evaluation=None):
    evaluation = (
        evaluation if evaluation is not None else {"eval_types": ["string_match"], "reference_answers": None}
    )
    return Task(
        task_id="r",
        domain="webarena",
        instruction=instruction,
        metadata={"sites": list(sites), "start_url": start, "eval": evaluation},
    )


@pytest.mark.parametrize(
    "task, fragment",
    [
        (_arena("How many branches does the dotfiles repository have?"), None),
        (
            _arena(
                "Open the merge requests of my repository",
                evaluation={"eval_types": ["url_match"], "reference_url": "__GITLAB__/-/merge_requests"},
            ),
            None,
        ),
        (_arena("How many branches does the dotfiles repository have?", sites=["amazon"]), "unknown site"),
        (_arena("How many branches does the dotfiles repository have?", sites=[]), "non-empty list"),
        (
            _arena("How many branches does the dotfiles repository have?", start="__REDDIT__/f/books"),
            "not on the task",
        ),
        (
            _arena("Upvote the newest post in the books forum", evaluation={"eval_types": ["program_html"]}),
            "mentions",
        ),
        (_arena("How many branches does the dotfiles repository have?", evaluation={}), "eval_types"),
        (_arena("Create a branch called release in the dotfiles repository"), "must ask for information"),
        (
            _arena("Open the issues page of my repository", evaluation={"eval_types": ["url_match"]}),
            "reference_url",
        ),
    ],
)
def test_webarena_validator(task, fragment):
    reason = validate_task(task)
    assert reason is None if fragment is None else fragment in reason, reason
    if fragment == "eval_types":
        assert "evaluation" in validate_task(
            task.model_copy(update={"metadata": {**task.metadata, "eval": None}})
        )


def test_custom_domain_validator_is_used():
    register_validator(
        "toy", lambda task: None if "room" in task.instruction else "toy tasks happen in a room"
    )
    assert validate_task(Task(task_id="x", domain="toy", instruction="walk to the kitchen now")) == (
        "toy tasks happen in a room"
    )
    assert validate_task(Task(task_id="x", domain="toy", instruction="walk to the next room")) is None
    # A domain without a validator gets the instruction check only.
    assert validate_task(Task(task_id="x", domain="other", instruction="zz")) is not None


# ---------------------------------------------------------------------------------------------- the table
@pytest.mark.parametrize("domain", sorted(BUILTIN_DOMAINS))
def test_every_built_in_domain_has_its_own_format_and_validator(domain):
    fmt = get_format(domain)
    assert fmt is not GENERIC_FORMAT and fmt is get_format(domain)
    assert get_validator(domain) is not None
    for task in get_domain(domain).seed_tasks():
        variant = fmt.model.model_validate(fmt.describe(task))  # a seed task reads as a variant
        assert fmt.to_metadata(variant, task) is not None


def test_variant_enums_are_the_domains_own():
    from dreamgym_env.domains.alfworld.tasks import ALFWORLD_TASK_TYPES
    from dreamgym_env.domains.webarena import DEFAULT_SITE_URLS
    from dreamgym_env.domains.webshop import WEBSHOP_CATEGORIES

    def enum(domain, field):
        schema = get_format(domain).model.model_json_schema()["properties"][field]
        return set(schema.get("items", schema)["enum"])

    assert enum("alfworld", "task_type") == set(ALFWORLD_TASK_TYPES)
    assert enum("webarena", "sites") == set(DEFAULT_SITE_URLS) - {"homepage"}
    assert enum("webshop", "category") == set(WEBSHOP_CATEGORIES)


# ---------------------------------------------------------------------------------------------- TextWorld
_ROOM = (
    "-= Kitchen =-\nYou are in a kitchen. A normal kind of place.\n"
    "You see a closed chest. On the table, you see a red apple.\nThere is an exit to the east.\n\n"
    "You are carrying nothing."
)


def _game_task(quest="take the red apple from the table and eat it."):
    return Task(
        task_id="textworld-game-1",
        domain="textworld",
        instruction=quest,
        metadata={
            "game_file": "/games/game-1.z8",
            "initial_observation": f"{_ROOM}\n\nYour task is to: {quest}",
            "initial_admissible": ["open chest", "take red apple from table"],
        },
    )


def test_a_textworld_variant_starts_in_the_parent_room_with_its_own_quest():
    parent = _game_task()
    fmt = get_format("textworld")
    quest = "open the chest and take the key from it."
    variant = fmt.model.model_validate({"object": "key", "instruction": quest})
    metadata = fmt.to_metadata(variant, parent)
    child = Task(
        task_id="c", domain="textworld", instruction=quest, metadata=metadata, parent_id=parent.task_id
    )
    start = get_domain("textworld").initial_state(child, np.random.default_rng(0))
    assert start.state.startswith("-= Kitchen =-") and start.state.endswith(f"Your task is to: {quest}")
    assert parent.instruction not in start.state
    assert "game_file" not in metadata  # the real game plays the parent's quest, not this one
    assert start.admissible_actions == parent.metadata["initial_admissible"]
    assert validate_task(child) is None


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({}, None),
        ({"instruction": "the apple is a lovely fruit to have"}, "no TextWorld command"),
        ({"metadata": {"object": "sword"}}, "does not name its object 'sword'"),
        ({"instruction": "open the chest and take the key from it."}, "first state gives another quest"),
    ],
)
def test_textworld_validator(change, fragment):
    task = _game_task()
    update = {**change}
    if "metadata" in change:
        update["metadata"] = {**task.metadata, **change["metadata"]}
    reason = validate_task(task.model_copy(update=update))
    assert reason is None if fragment is None else fragment in reason, reason
