"""TextWorld's abstract state: a canonical rendering of the engine's own world facts.

TextWorld describes rooms in prose padded with random flavour sentences ("The room seems oddly
familiar...") that no simulator can predict for a room it has not seen, and that a policy's features
learn as noise. The engine also reports the world as predicates (``at(P, kitchen: r)``,
``in(key: k, chest: c)``, ``closed(chest: c)``, ``north_of(hall: r, kitchen: r)``...). This module
renders those predicates as a short, canonical state: the same world always gives the same text, so the
real wrapper emits it and the experience model predicts it in one format::

    Done.
    Room: kitchen
    Exits: east, north (wooden door: closed)
    Here: chest (open: apple, key), table (on: knife), coin
    Carrying: nothing

The first line says what the step did: ``Done.`` (the world changed), ``Nothing happens.`` (it did
not: a refusal, ``look``, ``examine``), ``You won.`` or ``You lost.``. The first state has no such line
and ends with the quest (``Your task is to: ...``).

It also renders what the simulator needs and the agent never sees: the game's layout as it starts
(:func:`render_world`: every room, its exits with where they lead, every thing with what it holds and
which key opens it) and the quest's winning conditions (:func:`render_goal`).

Pure functions over plain tuples: the real wrapper turns TextWorld's propositions into :data:`Fact`
values (:func:`facts_of`), so this module needs no TextWorld install.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

Fact = tuple[str, tuple[tuple[str, str], ...]]
"""A predicate and its arguments as ``(name, type)`` pairs: ``("in", (("key", "k"), ("chest", "c")))``."""

_DIRECTIONS: tuple[str, ...] = ("north", "south", "east", "west")

QUEST_PREFIX = "Your task is to: "
"""How a first state states its quest, on its last line."""

RESULT_CHANGED = "Done."
RESULT_NOTHING = "Nothing happens."
RESULT_WON = "You won."
RESULT_LOST = "You lost."

_SUPPORTERS = frozenset({"s", "stove", "bbq"})
_FOOD = frozenset({"f"})
_STATIC = frozenset({"link", "match", "edible", "free", *(f"{d}_of" for d in _DIRECTIONS)})
"""Predicates that never change in play: the layout shows them, a goal need not repeat them."""
_HIDDEN = frozenset({"P", "I", "r", "d"})  # never listed as things


def facts_of(propositions: Iterable[Any], names: dict[str, str] | None = None) -> list[Fact]:
    """TextWorld propositions (``game_state["facts"]``, or a quest's conditions) as :data:`Fact` tuples.

    ``names`` maps variable ids to entity names, for conditions written over ids (``c_0`` -> ``chest``).
    """
    out: list[Fact] = []
    for prop in propositions:
        args = tuple(((names or {}).get(str(a.name), str(a.name)), str(a.type)) for a in prop.arguments)
        out.append((str(prop.name), args))
    return out


class _World:
    """An index over facts: where things are, what holds what, which way exits lead."""

    def __init__(self, facts: Iterable[Fact]) -> None:
        self.types: dict[str, str] = {}
        self.player_room = ""
        self.at: dict[str, list[str]] = defaultdict(list)  # room -> things on its floor
        self.inside: dict[str, list[str]] = defaultdict(list)  # holder (or "I") -> things in/on it
        self.state: dict[str, str] = {}  # thing or door -> open/closed/locked
        self.keys: dict[str, str] = {}  # lock -> key that matches it
        self.exits: dict[str, dict[str, str]] = defaultdict(dict)  # room -> direction -> room
        self.doors: dict[tuple[str, str], str] = {}  # (room, room) -> door
        self.rooms: list[str] = []
        for pred, args in facts:
            for name, typ in args:
                self.types.setdefault(name, typ)
                if typ == "r" and name not in self.rooms:
                    self.rooms.append(name)
            names = [a[0] for a in args]
            if pred == "at" and len(args) == 2:
                if args[0][1] == "P":
                    self.player_room = names[1]
                elif args[0][1] != "d":
                    self.at[names[1]].append(names[0])
            elif pred in ("in", "on") and len(args) == 2:
                self.inside[names[1]].append(names[0])
            elif pred in ("open", "closed", "locked") and len(args) == 1:
                self.state[names[0]] = pred
            elif pred == "match" and len(args) == 2:
                self.keys[names[1]] = names[0]
            elif pred.endswith("_of") and pred[:-3] in _DIRECTIONS and len(args) == 2:
                # north_of(a, b): a lies north of b, so b has an exit north to a.
                self.exits[names[1]][pred[:-3]] = names[0]
            elif pred == "link" and len(args) == 3:
                self.doors[(names[0], names[2])] = names[1]

    def thing(self, name: str) -> str:
        """One thing with its state and what it holds (nothing of what a closed container holds)."""
        held = sorted(self.inside.get(name, []))
        state = self.state.get(name)
        notes = [state] if state else []
        if held and state in (None, "open"):
            word = "on" if self.types.get(name) in _SUPPORTERS else "holds"
            notes.append(f"{word}: {', '.join(self.thing(h) for h in held)}")
        elif state == "open":
            notes.append("empty")
        return f"{name} ({', '.join(notes)})" if notes else name

    def things_in(self, room: str) -> str:
        listed = sorted(t for t in self.at.get(room, []) if self.types.get(t) not in _HIDDEN)
        return ", ".join(self.thing(t) for t in listed) or "nothing"

    def exits_of(self, room: str) -> str:
        parts = []
        for direction in _DIRECTIONS:
            target = self.exits.get(room, {}).get(direction)
            if target is None:
                continue
            door = self.doors.get((room, target)) or self.doors.get((target, room))
            parts.append(f"{direction} ({door}: {self.state.get(door, 'open')})" if door else direction)
        return ", ".join(parts) or "none"

    def of_kind(self, types: frozenset[str]) -> list[str]:
        """Every thing of one of ``types``, sorted."""
        return sorted(name for name, typ in self.types.items() if typ in types)

    def carrying(self) -> str:
        return ", ".join(self.thing(t) for t in sorted(self.inside.get("I", []))) or "nothing"


def render_facts_state(facts: Iterable[Fact], result: str = "", quest: str = "") -> str:
    """The canonical state of a world: the step's result, the room, its exits, what is there, the inventory.

    Args:
        facts: The world's facts after the step.
        result: The step's result line (:func:`step_result`); empty for the first state.
        quest: The quest, appended as ``Your task is to: ...`` (first states only).
    """
    world = _World(facts)
    room = world.player_room
    lines = [result] if result else []
    lines += [
        f"Room: {room or 'unknown'}",
        f"Exits: {world.exits_of(room)}",
        f"Here: {world.things_in(room)}",
        f"Carrying: {world.carrying()}",
    ]
    text = "\n".join(lines)
    if quest:
        text += f"\n\n{QUEST_PREFIX}{' '.join(quest.split())}"
    return text


def step_result(
    before: Iterable[Fact], after: Iterable[Fact], *, won: bool = False, lost: bool = False
) -> str:
    """The first line of a state after a step: what the step did, read off the facts."""
    if won:
        return RESULT_WON
    if lost:
        return RESULT_LOST
    return RESULT_CHANGED if set(before) != set(after) else RESULT_NOTHING


def render_world(facts: Iterable[Fact]) -> str:
    """The layout a game starts with, hidden from the agent, in the state's own words.

    One ``Map:`` line says where each exit leads; then each room's ``Room | Exits | Here`` lines exactly
    as a state shows them on arrival (so a move is a copy, not a rewrite); then what each closed
    container holds (what opening it reveals), which key opens what, and which things are supporters or
    food (what a state's bare names do not say, and the commands a thing admits depend on). The start
    room comes first, and the inventory the agent starts with last.
    """
    world = _World(facts)
    rooms = sorted(world.rooms, key=lambda r: (r != world.player_room, r))
    links = []
    for room in rooms:
        exits = world.exits.get(room, {})
        targets = [f"{d} {exits[d]}" for d in _DIRECTIONS if d in exits]
        links.append(f"{room}: {', '.join(targets) or 'no exits'}")
    lines = [f"Map: {'; '.join(links)}"]
    lines += [
        f"Room: {room} | Exits: {world.exits_of(room)} | Here: {world.things_in(room)}" for room in rooms
    ]
    hidden = sorted(
        f"{name}: {', '.join(world.thing(h) for h in sorted(held))}"
        for name, held in world.inside.items()
        if held and name != "I" and world.state.get(name) in ("closed", "locked")
    )
    if hidden:
        lines.append(f"Inside: {'; '.join(hidden)}")
    if world.keys:
        lines.append(f"Keys: {'; '.join(f'{lock}: {key}' for lock, key in sorted(world.keys.items()))}")
    kinds = [
        f"{label}: {', '.join(names)}"
        for label, names in (("supporters", world.of_kind(_SUPPORTERS)), ("food", world.of_kind(_FOOD)))
        if names
    ]
    if kinds:
        lines.append(f"Kinds: {'; '.join(kinds)}")
    carried = world.inside.get("I", [])
    if carried:
        lines.append(f"Carrying at start: {world.carrying()}")
    return "\n".join(lines)


def render_goal(quests: Sequence[Sequence[Sequence[Fact]]], losses: Sequence[Sequence[Fact]] = ()) -> str:
    """The quest's winning conditions: one line per quest (all must be met), ``or`` between a quest's ways to win.

    Each way to win is its changing facts joined by ``; `` (``at(P, kitchen); in(key, I)``); facts that
    never change in play (links, matching keys) are left to the layout. ``losses`` (the quests' fail
    events: a treasure hunter's wrong object taken) make a last line, ``lost if: ...``, whose ways
    end the game lost once one holds.
    """
    lines = []
    for events in quests:
        ways = _ways(events)
        if ways:
            lines.append(" or ".join(ways))
    lost = _ways(losses)
    if lost:
        lines.append(LOST_PREFIX + " or ".join(lost))
    return "\n".join(lines)


LOST_PREFIX = "lost if: "
"""Heads the line of a goal that says when the game is lost (:func:`render_goal`)."""


def _ways(events: Sequence[Sequence[Fact]]) -> list[str]:
    ways = []
    for event in events:
        parts = [
            f"{pred}({', '.join(name for name, _ in args)})" for pred, args in event if pred not in _STATIC
        ]
        if parts:
            ways.append("; ".join(parts))
    return list(dict.fromkeys(ways))
