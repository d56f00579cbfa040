"""Whether a TextWorld quest is won, judged from the canonical states an episode went through.

A game task carries its winning conditions as hidden facts (``goal``, written by
:func:`dreamgym_env.domains.textworld.facts.render_goal`): one line per quest, ``or`` between a quest's
ways to win, and each way a few predicates joined by ``; ``::

    at(P, kitchen); in(key, I)
    on(apple, table) or in(apple, fridge)

Every predicate a goal uses (``at``, ``in``, ``on``, ``open``, ``closed``, ``locked``, ``eaten``) is
something a canonical state shows, or showed earlier in the episode: where the player is, what a room
holds, what an open container or a supporter holds, what is carried, which doors and containers are
open. A closed container keeps what it held when it was last seen open (or what the layout says it
starts with). So the outcome of a step follows from the states, the way TextWorld's engine decides it:
a quest is complete once one of its ways held after some step, and the game is won when every quest
is complete. The experience model then only has to get the state right; the domain says whether the
step won, which is the signal a policy learns from.

Pure string functions: no TextWorld install needed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from dreamgym_env.domains.textworld.facts import LOST_PREFIX
from dreamgym_env.domains.textworld.state import (
    exits_of,
    layout_of,
    parse_state,
    split_things,
    thing_of,
    world_part,
)

_FACT = re.compile(r"(\w+)\((.*)\)")
_PREDICATES = frozenset({"at", "in", "on", "open", "closed", "locked", "eaten"})
_NOTHING = "Nothing happens."

Fact = tuple[str, tuple[str, ...]]
"""A goal predicate and its arguments by name: ``("in", ("key", "I"))``."""


def parse_goal(goal: str) -> list[list[list[Fact]]] | None:
    """A goal's quests, each a list of ways to win, each a list of facts; ``None`` if it is not a goal.

    A goal with a predicate the canonical state cannot show is not judged (``None``), so the caller
    falls back on the experience model's own verdict. The ``lost if:`` line is not a quest
    (:func:`parse_losses`).
    """
    lines = [line for line in goal.strip().split("\n") if not line.startswith(LOST_PREFIX)]
    return _parse_lines(lines)


def parse_losses(goal: str) -> list[list[Fact]]:
    """The ways a goal's ``lost if:`` line says the game is lost (empty without one, or if unreadable)."""
    lines = [line[len(LOST_PREFIX) :] for line in goal.strip().split("\n") if line.startswith(LOST_PREFIX)]
    parsed = _parse_lines(lines)
    return [way for ways in parsed or [] for way in ways]


def _parse_lines(lines: Sequence[str]) -> list[list[list[Fact]]] | None:
    quests: list[list[list[Fact]]] = []
    for line in lines:
        ways = []
        for way in line.split(" or "):
            facts = []
            for part in way.split("; "):
                match = _FACT.fullmatch(part.strip())
                if match is None or match.group(1) not in _PREDICATES:
                    return None
                facts.append((match.group(1), tuple(a.strip() for a in match.group(2).split(", "))))
            ways.append(facts)
        quests.append(ways)
    return quests or None


@dataclass
class Knowledge:
    """What an episode has shown so far: where each thing is, which things are open, where the player is.

    Updated state by state (:meth:`see`); what is out of view keeps its last known value, which is
    right in TextWorld, where only the player changes the world.
    """

    room: str = ""
    where: dict[str, tuple[str, str]] = field(default_factory=dict)  # thing -> ("at"|"in"|"on", place)
    status: dict[str, str] = field(default_factory=dict)  # door or container -> open|closed|locked
    eaten: set[str] = field(default_factory=set)

    @classmethod
    def from_world(cls, world: str) -> Knowledge:
        """What the game's layout says at the start: every room's things and doors, closed containers' contents."""
        known = cls()
        for room, line in layout_of(world)[1].items():  # "Exits: .. | Here: .."
            parts = dict(part.partition(": ")[::2] for part in line.split(" | "))
            known._see_room(room, parts.get("Exits", ""), parts.get("Here", ""))
        for container, held in world_part(world, "Inside").items():
            for item in split_things(held):
                known._see_thing(thing_of(item), ("in", container))
        return known

    def see(self, state: str, action: str = "") -> bool:
        """Take in a state reached by ``action``; ``False`` when it is not a canonical state."""
        parsed = parse_state(state)
        if parsed is None:
            return False
        if action.startswith("eat ") and parsed.result != _NOTHING:
            eaten = action[len("eat ") :]
            carried = {thing_of(item)[0] for item in split_things(parsed.lines["Carrying"])}
            if eaten not in carried:
                self.eaten.add(eaten)
                self.where.pop(eaten, None)
        self.room = parsed.lines["Room"]
        self._see_room(self.room, parsed.lines["Exits"], parsed.lines["Here"])
        for item in split_things(parsed.lines["Carrying"]):
            self._see_thing(thing_of(item), ("in", "I"))
        return True

    def _see_room(self, room: str, exits: str, here: str) -> None:
        for _, door, door_state in exits_of(exits):
            if door:
                self.status[door] = door_state
        for item in split_things(here):
            self._see_thing(thing_of(item), ("at", room))

    def _see_thing(self, thing: tuple[str, str, list[str]], place: tuple[str, str]) -> None:
        name, kind, held = thing
        self.where[name] = place
        if kind in ("open", "closed", "locked"):
            self.status[name] = kind
        if kind == "open" or kind == "on":  # what it holds is in view; a closed one keeps the last seen
            for inner in held:
                self.where[inner] = ("on" if kind == "on" else "in", name)

    def holds(self, fact: Fact) -> bool:
        """Whether ``fact`` is true as far as the episode has shown."""
        predicate, args = fact
        if predicate == "eaten":
            return args[0] in self.eaten
        if predicate in ("open", "closed", "locked"):
            return self.status.get(args[0]) == predicate
        if len(args) != 2:
            return False
        thing, place = args
        if predicate == "at" and thing == "P":
            return self.room == place
        return self.where.get(thing) == (predicate, place)


def goal_reached(goal: str, world: str, start: str, steps: Sequence[tuple[str, str]]) -> bool | None:
    """Whether every quest of ``goal`` was complete after the last of ``steps``, or ``None`` if it cannot say.

    ``start`` is the episode's first state and ``steps`` its ``(action, state it led to)`` pairs, first
    to last; ``world`` is the game's starting layout (``""`` when the task has none). Quests are judged
    after each step, as the engine does, not on the first state. ``None`` when the goal uses a
    predicate a state cannot show or a state is not canonical (the prose format).
    """
    outcome = goal_outcome(goal, world, start, steps)
    return None if outcome is None else outcome[0]


def goal_outcome(
    goal: str, world: str, start: str, steps: Sequence[tuple[str, str]]
) -> tuple[bool, bool] | None:
    """``(won, lost)`` after the last of ``steps`` (see :func:`goal_reached`), or ``None`` if it cannot say.

    Lost when, after the last step, one of the ways of the goal's ``lost if:`` line holds (a treasure
    hunter's wrong object carried), as TextWorld's fail events end a game; a step that both wins and
    loses is lost.
    """
    quests = parse_goal(goal)
    if quests is None:
        return None
    losses = parse_losses(goal)
    known = Knowledge.from_world(world)
    if not known.see(start):
        return None
    done = [False] * len(quests)
    for action, state in steps:
        if not known.see(state, action):
            return None
        for i, ways in enumerate(quests):
            done[i] = done[i] or any(all(known.holds(fact) for fact in way) for way in ways)
    lost = any(all(known.holds(fact) for fact in way) for way in losses)
    return all(done) and not lost, lost
