"""What a TextWorld quest's instruction says about the rooms on its way, for a learned dream to keep.

TextWorld writes a quest's instruction from its walkthrough, one sentence per command: "First, head
north. Then, make sure that the passageway is opened. And then, go west. Then, take the pizza from
the cabinet in the bathroom." A learned dream never sees the game's map, but the agent reads this
text, and a dream that contradicts it is a world the quest cannot be played in: a room entered by
the walkthrough's ``go north`` with no exit north when the text says to go north next, no cabinet
holding a pizza where the text says to take it. So the dream keeps what the text says, and invents
the rest:

    >>> [str(step) for step in instruction_plan("First, head north. Then, take the coin from the floor of the den.")]
    ['go north', 'carried coin in den']

:func:`reveal_needs` turns the plan into what the next revealing step must show (the room the
walkthrough enters: its name, the exit it leaves by, the things it names; the container it opens:
what is taken from it), placing the walkthrough's rooms on the dream's own map: from the first
room, along the moves of the text, through the rooms the episode has shown. Off that path the dream
is free, except that a new room takes no name the episode or the text has given another room.

Pure string functions: no TextWorld install needed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from dreamgym_env.domains.textworld.instruction import Goal, command_goal
from dreamgym_env.domains.textworld.state import _OPPOSITE, exits_of, layout_of, parse_state

# The move sentences of TextWorld's instruction grammar: "venture west", "go to the west", "take a trip
# west", "make an effort to travel north"...: a verb of motion and a direction that ends the sentence.
_MOVE = re.compile(
    r"\b(?:go|head|move|travel|venture|walk|trip)(?: to)?(?: the)? (?P<direction>north|south|east|west)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class PlanStep:
    """One command of the walkthrough: a move (``direction``) or what another command makes true (``goal``)."""

    direction: str = ""
    goal: Goal | None = None

    def __str__(self) -> str:
        if self.goal is None:
            return f"go {self.direction}"
        g = self.goal
        return " ".join(
            p for p in (g.kind, g.thing, g.holder and f"from {g.holder}", g.room and f"in {g.room}") if p
        )


@functools.lru_cache(maxsize=1024)
def instruction_plan(instruction: str) -> tuple[PlanStep, ...]:
    """The commands ``instruction`` lists, in order: moves and the goals of the other commands it reads.

    Sentences this grammar does not read (flavour, or a command in other words) are left out; the plan
    is then shorter, never wrong about what it keeps. Cached: a dream reads it at every revealing step.
    """
    steps = []
    for sentence in re.split(r"(?<=[.!?]) ", " ".join(instruction.split())):
        clause = sentence.rstrip(".!?")
        move = _MOVE.search(clause)
        if move:
            steps.append(PlanStep(direction=move.group("direction").lower()))
            continue
        goal = command_goal(clause)
        if goal is not None:
            steps.append(PlanStep(goal=goal))
    return tuple(steps)


@dataclass
class ThingNeed:
    """A thing a room must list: its ``state`` (``closed``, ``locked``, ``open``; ``""``: any) and what it must hold.

    ``kind`` is ``object`` (on the floor), ``container``, ``supporter``, or ``holder`` (one or the other).
    """

    kind: str
    state: str = ""
    holds: list[str] = field(default_factory=list)


@dataclass
class RoomNeeds:
    """What a room the walkthrough enters must show: its name (``""``: any new one), exits and things.

    ``exits`` maps a direction to its door as ``(name, state)``, ``("", "open")`` for no door or an open
    one (the walkthrough walks through), or ``None`` when any door or none will do.
    """

    name: str = ""
    exits: dict[str, tuple[str, str] | None] = field(default_factory=dict)
    things: dict[str, ThingNeed] = field(default_factory=dict)


@dataclass(frozen=True)
class Reveal:
    """What one revealing step must keep: the room it enters, or what the container it opens holds.

    ``avoid`` are the names a new room must not take: rooms the episode showed, and rooms the
    instruction places elsewhere. ``extra_exits``: how many exits a new room may list besides the ones
    it needs (the way back, the walkthrough's way on); ``None``: any number. A room off the
    walkthrough with none is a dead end. ``elsewhere``: things the instruction places in another
    named room, which a new room does not list (a coin "on the floor of the parlor" is in no other room).
    """

    room: RoomNeeds | None = None
    contents: tuple[str, ...] = ()
    avoid: frozenset[str] = frozenset()
    extra_exits: int | None = None
    elsewhere: frozenset[str] = frozenset()


_BEFORE = {"open": "closed", "unlocked": "locked", "closed": "open", "locked": "closed"}
"""The state a command finds its thing in: ``open`` finds it closed, ``unlock`` locked..."""


@dataclass
class _Node:
    """A room of the walkthrough: what its commands need, and the move that leaves it."""

    needs: RoomNeeds = field(default_factory=RoomNeeds)
    goals: list[Goal] = field(default_factory=list)
    leave: str = ""


def _nodes(plan: Sequence[PlanStep]) -> list[_Node]:
    """The walkthrough's rooms in order, each with what its commands need of it."""
    nodes = [_Node()]
    for step in plan:
        if step.goal is None:
            nodes[-1].leave = step.direction
            nodes.append(_Node())
            nodes[-1].needs.exits[_OPPOSITE[step.direction]] = None
            continue
        nodes[-1].goals.append(step.goal)
        if step.goal.room:
            nodes[-1].needs.name = step.goal.room
    for node in nodes:
        _place_goals(node)
    return nodes


def _place_goals(node: _Node) -> None:
    """What the commands done in one room say it holds (in TextWorld's instruction, a command names its room)."""
    needs = node.needs
    if node.leave:  # walked through: no door, or an open one, unless a command here opens it (below)
        needs.exits[node.leave] = ("", "open")
    holders = {g.holder for g in node.goals if g.holder}
    for goal in node.goals:
        if goal.kind in ("open", "unlocked") and goal.thing not in holders and node.leave:
            # A door on the way on (TextWorld's doors are opened to go through), as the first command finds it.
            if needs.exits.get(node.leave) in (None, ("", "open")):
                needs.exits[node.leave] = (goal.thing, _BEFORE[goal.kind])
            continue
        if goal.kind in _BEFORE:
            # What the room shows is the state before the first command on the thing: closed to be
            # opened, locked to be unlocked, open to be closed, closed to be locked.
            thing = needs.things.setdefault(goal.thing, ThingNeed("container"))
            thing.state = thing.state or _BEFORE[goal.kind]
        elif goal.kind == "carried" and goal.holder:
            holder = needs.things.setdefault(goal.holder, ThingNeed("holder"))
            holder.holds.append(goal.thing)
        elif goal.kind == "carried" and goal.room:
            needs.things.setdefault(goal.thing, ThingNeed("object"))
        elif goal.kind in ("in", "on"):
            holder = needs.things.setdefault(goal.holder, ThingNeed("holder"))
            if holder.kind == "holder":
                holder.kind = "container" if goal.kind == "in" else "supporter"
    for thing in needs.things.values():
        if thing.kind == "holder" and thing.state:
            thing.kind = "container"
        elif thing.kind == "container" and not thing.state:
            thing.state = "open"


def _fewest(*bounds: int | None) -> int | None:
    """The tightest of some bounds, ``None`` standing for none."""
    given = [b for b in bounds if b is not None]
    return min(given) if given else None


def _rooms_left(
    rooms: int, states: Sequence[str], links: dict[str, dict[str, str]], here: str, way: str
) -> int:
    """How many exits a room entered now by ``way`` from ``here`` may list besides the way back.

    In a map of ``rooms`` rooms, those the episode has not shown are behind the exits it has shown and
    not taken; TextWorld lays a custom map out as a walk on a grid, a tree but for a rare loop, so each
    such exit leads to at least one of them, and a new room may open ways to the rest only.
    """
    exits: dict[str, list[str]] = {}
    for parsed in filter(None, map(parse_state, states)):
        exits[parsed.lines["Room"]] = [d for d, _, _ in exits_of(parsed.lines["Exits"])]
    untaken = sum(
        1
        for room, directions in exits.items()
        for d in directions
        if d not in links.get(room, {}) and not (room == here and d == way)
    )
    return max(0, rooms - len(exits) - 1 - untaken)


def reveal_needs(
    instruction: str,
    states: Sequence[str],
    world: str,
    action: str,
    *,
    chain: bool = False,
    rooms: int | None = None,
) -> Reveal:
    """What the step ``action`` after ``states`` (the episode's, first to current) must show.

    ``world`` is the layout the episode has shown (:func:`~.state.dream_layout`). The
    walkthrough's rooms are found on that map, from the first
    room along the instruction's moves. A move from the last room found along the walkthrough's next
    move enters the next walkthrough room: its needs. Opening a container in a walkthrough room
    from which the text takes things: those things. Any other step needs only that a new room take a
    new name.

    With ``chain`` (the family's maps are the walkthrough's rooms in a line, any other room a dead end
    off it) and an instruction that spells out the moves, a room off the walkthrough is a dead end,
    and the walkthrough's rooms list no exit besides the way back and the way on unless the first
    room showed one (the game hangs dead ends off its chain).

    With ``rooms`` (how many the map has: a custom game's ``world_size``, :func:`~.families.game_rooms`)
    a new room lists no more ways on than the rooms the episode has not shown can fill.
    """
    shown = [p.lines["Room"] for p in map(parse_state, states) if p is not None]
    if not shown:
        return Reveal()
    nodes = _nodes(instruction_plan(instruction))
    named = {n.needs.name for n in nodes if n.needs.name}
    placed = {
        thing: node.needs.name
        for node in nodes
        if node.needs.name
        for name, need in node.needs.things.items()
        for thing in ([name] if need.kind == "object" else need.holds)
    }
    links, _ = layout_of(world)
    found = [shown[0]]  # the walkthrough's rooms, as far as the episode has shown them
    for node in nodes[:-1]:
        nxt = links.get(found[-1], {}).get(node.leave)
        if nxt is None:
            break
        found.append(nxt)
    here = shown[-1]
    avoid = frozenset(shown) | named
    frontier = len(found) - 1
    on_the_way = frontier + 1 < len(nodes) and here == found[frontier]
    chained = chain and any(node.leave for node in nodes)
    way = action[len("go ") :] if action.startswith("go ") else ""
    left = _rooms_left(rooms, states, links, here, way) if rooms and way else None
    if on_the_way and action == f"go {nodes[frontier].leave}":
        needs = nodes[frontier + 1].needs
        first = parse_state(states[0])
        branches = first is not None and len(exits_of(first.lines["Exits"])) > 1
        ways_on = sum(1 for d in needs.exits if d != _OPPOSITE.get(way))
        extra = _fewest(
            (1 if branches else 0) if chained else None, None if left is None else max(0, left - ways_on)
        )
        elsewhere = frozenset(t for t, room in placed.items() if room != needs.name)
        return Reveal(room=needs, avoid=avoid - {needs.name}, extra_exits=extra, elsewhere=elsewhere)
    if action.startswith("open "):
        name = action[len("open ") :]
        taken = [
            thing
            for node, room in zip(nodes, found, strict=False)
            if room == here
            for thing in node.needs.things.get(name, ThingNeed("")).holds
        ]
        return Reveal(contents=tuple(dict.fromkeys(taken)), avoid=avoid)
    return Reveal(
        avoid=avoid, extra_exits=_fewest(0 if chained and way else None, left), elsewhere=frozenset(placed)
    )
