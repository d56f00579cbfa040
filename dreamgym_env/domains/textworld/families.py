"""The published rules of TextWorld's challenge families: a learned dream's losses, and a chain's dead ends.

A game made by one of TextWorld's challenges (``tw-make tw-treasure_hunter``, ``tw-coin_collector``,
``tw-simple``) follows its family's rules, as the challenge documents them: in the treasure hunter
the room holds a wrong object, and picking up anything but the quest's object loses; in tw-simple,
eating the food the quest asks to place loses; the coin collector cannot be lost. The game file's
own goal facts (``lost if: in(fly larva, I)``) are hidden from a learned dream, and an instruction
never speaks of losing, so without these rules a learned dream paid no loss: the agent went on
after a step the real game ends, and simulated success was inflated. What the family is, is public:
the challenge that made the game writes its name into the game's metadata (:func:`game_family`),
as a user who generated the game knows it.

:func:`family_lost` reads a family's rule with what the episode showed, like
:func:`~dreamgym_env.domains.textworld.instruction.goal_met` for wins. A game of no known family (a
custom quest) has no rule: its losses stay the experience model's to judge. Pure string functions,
apart from :func:`game_family`, which reads the game's ``.json`` beside it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from dreamgym_env.domains.textworld.instruction import (
    _eaten,
    _same,
    _top,
    instruction_goal,
)
from dreamgym_env.domains.textworld.plan import instruction_plan
from dreamgym_env.domains.textworld.state import CanonicalState, parse_state

logger = logging.getLogger(__name__)

FAMILIES = ("tw-treasure_hunter", "tw-coin_collector", "tw-simple", "tw-cooking")
"""TextWorld's challenge families, as their games' metadata names them (``uuid`` starts with one)."""


def _game_uuid(game_file: str | os.PathLike[str]) -> str:
    """The ``uuid`` TextWorld writes into a game's metadata (``<game>.json``), or ``""``."""
    meta_path = Path(game_file).with_suffix(".json")
    try:
        return str(json.loads(meta_path.read_text()).get("metadata", {}).get("uuid", ""))
    except (OSError, ValueError, AttributeError) as e:
        logger.debug("No metadata for %s: %s", game_file, e)
        return ""


def game_family(game_file: str | os.PathLike[str]) -> str | None:
    """The challenge family of a game, from the metadata TextWorld writes beside it (``<game>.json``).

    ``None`` for a game of no challenge (a custom quest), or one whose metadata is missing or unreadable.
    """
    uuid = _game_uuid(game_file)
    return next((family for family in FAMILIES if uuid.startswith(f"{family}-")), None)


def game_rooms(game_file: str | os.PathLike[str]) -> int | None:
    """How many rooms a custom game was made with (``tw-make custom --world-size N``), from its metadata.

    A custom game's ``uuid`` (``tw-<options>-<grammar>-<seeds>``) encodes the options its maker chose,
    the number of rooms first, as TextWorld's ``GameOptions.uuid`` writes them (hashids, salt
    ``TextWorld``). Like a challenge's family and level, it is what a user who made the game set, not
    the map: a learned dream bounds the rooms it invents by it (:func:`~.plan.reveal_needs`). ``None``
    for a challenge's game, or metadata that is missing or not of that form.
    """
    uuid = _game_uuid(game_file)
    parts = uuid.split("-")
    if len(parts) < 4 or parts[0] != "tw" or any(uuid.startswith(f"{family}-") for family in FAMILIES):
        return None
    try:
        from hashids import Hashids  # TextWorld's own dependency

        options = Hashids(salt="TextWorld").decode(parts[1])
    except ImportError:
        return None
    return int(options[0]) if options and int(options[0]) > 0 else None


def _carried(state: CanonicalState) -> set[str]:
    return {name.lower() for name, _, _ in _top(state.lines["Carrying"])}


def _wrong_pickup(instruction: str, before: CanonicalState, now: CanonicalState) -> bool:
    """Treasure hunter: something newly carried that is not the quest's object."""
    goal = instruction_goal(instruction)
    if goal is None or goal.kind != "carried":
        return False
    return any(not _same(name, goal.thing) for name in _carried(now) - _carried(before))


def _quest_food_eaten(instruction: str, before: CanonicalState, now: CanonicalState) -> bool:
    """tw-simple: a thing the quest moves (takes, puts, inserts) eaten, unless eating it is the quest."""
    goal = instruction_goal(instruction)
    if goal is not None and goal.kind == "eaten":
        return False
    handled = {
        step.goal.thing
        for step in instruction_plan(instruction)
        if step.goal is not None and step.goal.kind in ("carried", "in", "on", "dropped")
    }
    return any(_eaten(thing, before, now) for thing in handled)


_RULES: dict[str, Callable[[str, CanonicalState, CanonicalState], bool]] = {
    "tw-treasure_hunter": _wrong_pickup,
    "tw-simple": _quest_food_eaten,
    "tw-coin_collector": lambda instruction, before, now: False,
}


_CHAINS = frozenset({"tw-coin_collector"})
"""Families whose map is a chain of the walkthrough's rooms, any other room a dead end off it."""


def chain_map(family: object) -> bool:
    """Whether ``family``'s maps are a chain along the walkthrough with dead ends off it.

    The coin collector's, as its challenge documents: the rooms of the quest in a line, the coin at the
    far end, and any distractor room a dead end. A learned dream of such a game enters a dead end
    off the walkthrough (:func:`~dreamgym_env.domains.textworld.plan.reveal_needs`), rather than a
    map that goes on without end and leads a wandering agent ever further from the coin.
    """
    return isinstance(family, str) and family in _CHAINS


def has_loss_rule(family: object) -> bool:
    """Whether ``family`` is one whose losses :func:`family_lost` decides."""
    return isinstance(family, str) and family in _RULES


def family_lost(family: object, instruction: str, states: Sequence[str]) -> bool | None:
    """Whether the last step of an episode (its canonical ``states``, oldest first) loses by the family's rule.

    ``None`` when the family has no rule here (unknown, or a custom quest) or the last two states are
    not canonical: the caller keeps another judge.
    """
    rule = _RULES.get(family) if isinstance(family, str) else None
    if rule is None or len(states) < 2:
        return None
    before, now = parse_state(states[-2]), parse_state(states[-1])
    if before is None or now is None:
        return None
    return rule(instruction, before, now)
