"""The outcomes a TextWorld step can have, written out, for the experience model to choose among.

Most of a step's answer is bookkeeping once its outcome is chosen: ``take key from chest`` either
moves the key from the chest's listing to ``Carrying`` (and the chest reads ``empty`` if nothing
else is in it) or changes nothing, and the step either wins, loses or does neither. A small model
that writes the answer token by token gets the bookkeeping wrong (the key left both in the chest and
carried, another container opened); asked instead which of the written outcomes is most likely,
it only has to judge what is uncertain. :func:`step_outcomes` lists them, as answers in the model's
own form (the result line and the lines that change, :func:`~.state.state_changes`), and
the model scores each by its log-probability (:attr:`~dreamgym_env.config.EnvConfig.rank_outcomes`).

The outcomes follow from the state and a layout (``world``): the game's, in the privileged setting;
in the learned one, only what the episode has shown itself (:func:`~.state.dream_layout`).
A step whose outcome shows something not known yet (a room entered for the first time, a container
opened whose contents were never seen) has no list: the model writes it.

Things are listed as the engine's facts render them (:mod:`~.facts`): sorted by name; a
container with its state and, when open, ``holds: ...`` or ``empty``; a supporter ``on: ...``, or its
bare name when nothing is on it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dreamgym_env.domains.textworld.plan import Reveal, RoomNeeds, ThingNeed
from dreamgym_env.domains.textworld.state import (
    _OPPOSITE,
    CanonicalState,
    _item_parts,
    exits_of,
    nearby_facts,
    parse_state,
    split_things,
    state_changes,
    world_part,
)

RESULT_CHANGED = "Done."
RESULT_NOTHING = "Nothing happens."
ENDINGS = (RESULT_CHANGED, "You won.", "You lost.")
"""The result lines of a step that changed the world: it goes on, wins or loses."""


@dataclass
class _Thing:
    """One listed thing: its state (``open``, ``closed``, ``locked`` or ``""``) and what it holds or supports."""

    name: str
    state: str = ""
    word: str = ""  # "holds", "on", or "" when nothing is listed inside
    held: list[_Thing] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # notes this module does not read

    def render(self) -> str:
        notes = [self.state] if self.state else []
        notes += self.other
        if self.held and self.state in ("", "open"):
            word = self.word or ("on" if not self.state else "holds")
            notes.append(f"{word}: {_render(self.held)}")
        elif self.state == "open":
            notes.append("empty")
        return f"{self.name} ({', '.join(notes)})" if notes else self.name


def _things(listing: str) -> list[_Thing]:
    out = []
    for item in split_things(listing):
        name, notes, word, held = _item_parts(item)
        state = next((n for n in notes if n in ("open", "closed", "locked")), "")
        other = [n for n in notes if n != state and n != "empty"]
        out.append(_Thing(name, state, word, _things(held), other))
    return out


def _render(things: Sequence[_Thing]) -> str:
    return ", ".join(t.render() for t in sorted(things, key=lambda t: t.name)) or "nothing"


def _find(things: list[_Thing], name: str) -> _Thing | None:
    return next((t for t in things if t.name == name), None)


def _split(rest: str, word: str) -> tuple[str, str] | None:
    """``"key from chest"`` split at ``" from "``: ``("key", "chest")``."""
    left, sep, right = rest.partition(f" {word} ")
    return (left, right) if sep and left and right else None


class _World:
    """The state's lines as things, changed by one command."""

    def __init__(self, state: CanonicalState, inside: dict[str, str], whole: bool) -> None:
        self.state = state
        self.whole = whole  # a container ``inside`` does not list is empty
        self.here = _things(state.lines["Here"])
        self.carried = _things(state.lines["Carrying"])
        self.exits = exits_of(state.lines["Exits"])
        self.inside = inside

    def lines(self) -> dict[str, str]:
        exits = ", ".join(f"{d} ({n}: {s})" if n else d for d, n, s in self.exits) or "none"
        return {
            **self.state.lines,
            "Exits": exits,
            "Here": _render(self.here),
            "Carrying": _render(self.carried),
        }

    def _set_door(self, name: str, old: str, new: str) -> bool:
        for i, (direction, door, state) in enumerate(self.exits):
            if door == name and state == old:
                self.exits[i] = (direction, door, new)
                return True
        return False

    def _container(self, name: str) -> _Thing | None:
        return _find(self.here, name) or _find(self.carried, name)

    def apply(self, action: str) -> bool | None:
        """Change the world as ``action`` succeeding would: ``False`` when it cannot, ``None`` when unknown.

        Unknown: opening a container whose contents the layout does not say (a revealing step), or a
        command this module does not model.
        """
        verb, _, rest = action.partition(" ")
        if verb == "take":
            parts = _split(rest, "from")
            holder = None if parts is None else _find(self.here, parts[1])
            source = self.here if parts is None else [] if holder is None else holder.held
            thing = _find(source, parts[0] if parts else rest)
            if thing is None:
                return False
            source.remove(thing)
            self.carried.append(thing)
            return True
        if verb in ("drop", "eat", "put", "insert"):
            parts = {"put": _split(rest, "on"), "insert": _split(rest, "into")}.get(verb, (rest, ""))
            if parts is None:
                return False
            thing = _find(self.carried, parts[0])
            if thing is None:
                return False
            self.carried.remove(thing)
            if verb == "drop":
                self.here.append(thing)
            elif verb in ("put", "insert"):
                holder = _find(self.here, parts[1])
                if holder is None or holder.state != ("open" if verb == "insert" else ""):
                    return False
                holder.held.append(thing)
                holder.word = "on" if verb == "put" else "holds"
            return True
        if verb in ("open", "close"):
            old, new = ("closed", "open") if verb == "open" else ("open", "closed")
            if self._set_door(rest, old, new):
                return True
            thing = self._container(rest)
            if thing is None or thing.state != old:
                return False
            if verb == "open":
                if rest not in self.inside and not self.whole:
                    return None  # what it holds is not known: the step reveals it
                thing.held, thing.word = _things(self.inside.get(rest, "")), "holds"
            thing.state = new
            return True
        if verb in ("lock", "unlock"):
            parts = _split(rest, "with")
            if parts is None or _find(self.carried, parts[1]) is None:
                return False
            old, new = ("closed", "locked") if verb == "lock" else ("locked", "closed")
            if self._set_door(parts[0], old, new):
                return True
            thing = self._container(parts[0])
            if thing is None or thing.state != old:
                return False
            thing.state = new
            return True
        return None


def _shown_inside(states: Sequence[str]) -> dict[str, str]:
    """What each container held when the episode last showed it open (``""``: empty), newer than any layout."""
    inside: dict[str, str] = {}
    for text in states:
        parsed = parse_state(text)
        if parsed is None:
            continue
        for key in ("Here", "Carrying"):
            for thing in _things(parsed.lines[key]):
                if thing.state == "open":
                    inside[thing.name] = _render(thing.held) if thing.held else ""
    return inside


def _move(state: CanonicalState, world: str, seen: Sequence[str], action: str) -> dict[str, str] | None:
    """The lines after ``go <direction>`` into a room the layout knows, or ``None`` when it knows none."""
    line = nearby_facts(state.render(), world, seen, action)
    direction = action.removeprefix("go ")
    if not line.startswith(f"{direction}: Room: "):
        return None
    room, _, rest = line.split("\n", 1)[0][len(direction) + 2 :].partition(" | ")
    fields = dict(part.partition(": ")[::2] for part in rest.split(" | "))
    if set(fields) != {"Exits", "Here"}:
        return None
    return {**state.lines, "Room": room.removeprefix("Room: "), **fields}


def step_outcomes(
    state: str, action: str, world: str, seen: Sequence[str] = (), *, whole_layout: bool = False
) -> list[str] | None:
    """The answers ``action`` can have after ``state``: it changes nothing, or it succeeds and goes on, wins or loses.

    Args:
        state: The current canonical state.
        action: The command.
        world: The layout the simulator knows (the game's, or the one the episode showed).
        seen: The episode's states before ``state``, oldest first (the rooms as last shown).
        whole_layout: ``world`` is the game's whole layout, whose ``Inside:`` line lists every closed
            container that holds something: one it does not list is empty. A layout the episode
            showed lists only what it saw.

    Returns:
        ``["Nothing happens.", <success>, <success, won>, <success, lost>]`` as answers (result line and
        changed lines), or only the first when the command cannot succeed here; ``None`` when the
        outcome is not known (a step that reveals a room or a container's contents, a state that is
        not canonical, a command of another kind): then the model writes the answer.
    """
    parsed = parse_state(state)
    if parsed is None:
        return None
    nothing = CanonicalState(RESULT_NOTHING, parsed.lines).render()
    if action.startswith("go "):
        door = next((s for d, n, s in exits_of(parsed.lines["Exits"]) if d == action[3:]), None)
        if door is None or door in ("closed", "locked"):
            return [state_changes(state, nothing)]
        lines = _move(parsed, world, seen, action)
    else:
        inside = {**world_part(world, "Inside"), **_shown_inside(seen)}
        changed = _World(parsed, inside, whole_layout)
        done = changed.apply(action)
        if done is False:
            return [state_changes(state, nothing)]
        lines = None if done is None else changed.lines()
    if lines is None:
        return None
    return [state_changes(state, nothing)] + [
        state_changes(state, CanonicalState(result, lines).render()) for result in ENDINGS
    ]


_NAME = r"[^\n(),:. ]([^\n(),:.]{0,38}[^\n(),:. ])?"
"""A room's or a thing's name: no full stop, as TextWorld's have none, and no space at either end,
which a reader strips (a model that writes ``salon.`` or ``salon `` has named a room ``salon`` again)."""
_LISTING = r"[^\n]{1,240}"
"""A line of things, bounded: an answer that runs on is cut by the pattern, not by ``max_tokens``."""
_ENDING = "(" + "|".join(re.escape(result) for result in ENDINGS) + ")"
_DIRECTIONS = ("north", "south", "east", "west")
"""The order TextWorld lists a room's exits in."""


def _class_escape(chars: str) -> str:
    return "".join("\\" + c if c in "\\]^-[" else c for c in chars)


@functools.lru_cache(maxsize=256)
def _name_except(names: frozenset[str], *, starting: bool = False, limit: int = 40) -> str:
    """A name of at most ``limit`` characters that is none of ``names`` (nor starts with one, ``starting``).

    Regular expressions that guided decoding accepts have no lookahead, so the complement is spelt
    out over the names' prefix tree: at each prefix, stop (unless the prefix is a name), go on along
    the tree, or leave it with a character no name continues with, after which anything goes.
    (Groups are capturing: vLLM's regex grammar does not read every non-capturing form.)
    """
    tree: dict[str, Any] = {}
    for name in (n for n in names if 0 < len(n) < limit):  # a longer name is no answer anyway
        node = tree
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}  # a name ends here

    def tail(room: int) -> str:
        """Up to ``room`` more characters, the last no space."""
        return rf"([^\n(),:.]{{0,{room - 1}}}[^\n(),:. ])?" if room > 0 else ""

    def branch(node: dict[str, Any], depth: int, last: str) -> str:
        followers = sorted(c for c in node if c)
        options = [
            re.escape(c) + branch(node[c], depth + 1, c)
            for c in followers
            if not (starting and "" in node[c])  # a name ends there: nothing may start with it
        ]
        room = limit - depth - 1
        options.append(f"[^\\n(),:. {_class_escape(''.join(followers))}]{tail(room)}")
        if depth and " " not in followers and room > 0:  # a space, and then more than spaces
            options.append(rf" [^\n(),:.]{{0,{room - 1}}}[^\n(),:. ]")
        # Stopping here is one more option, written as "?": vLLM's regex grammar rejects "(|...)". Not
        # where a name ends, nor after a space.
        may_stop = depth and "" not in node and last != " "
        return "(" + "|".join(options) + (")?" if may_stop else ")")

    return branch(tree, 0, "") if names else _NAME


def _door(need: tuple[str, str] | None, taken: frozenset[str] = frozenset()) -> str:
    """An exit's door as ``need`` has it: any or none, none, none or an open one, or this one.

    ``None``: any door or none; ``("", "")``: no door; ``("", "open")``: no door or an open one (a way
    the walkthrough walks through without opening it); else the door ``(name, state)``.
    Any door is named as none of ``taken``, the doors of the room's other exits (a door joins two rooms,
    through one exit of each).
    """
    if need == ("", ""):
        return ""
    if need == ("", "open"):
        return rf"( \({_name_except(taken)}: open\))?"
    if need is None:
        return rf"( \({_name_except(taken)}: (open|closed|locked)\))?"
    return re.escape(f" ({need[0]}: {need[1]})")


def _exits_with(required: dict[str, tuple[str, str] | None], extra: int | None = None) -> str:
    """The ``Exits`` listings that include the ``required`` directions (with their doors, when given).

    Each direction once, in TextWorld's order; up to ``extra`` other directions (any, when ``None``)
    may be listed, with a door (none of the required ones) or not.
    """
    taken = frozenset(need[0] for need in required.values() if need is not None and need[0])
    others = [d for d in _DIRECTIONS if d not in required]
    listings = []
    for mask in range(2 ** len(others)):
        if extra is not None and mask.bit_count() > extra:
            continue
        chosen = {d for i, d in enumerate(others) if mask >> i & 1} | set(required)
        listings.append(", ".join(f"{d}{_door(required.get(d), taken)}" for d in _DIRECTIONS if d in chosen))
    return "(" + "|".join(listings) + ")"


_INNER = r"[^\n()]{1,120}"
"""What a container or a supporter lists, bounded."""


def _listing_with(
    needed: dict[str, str], besides: frozenset[str] = frozenset(), *, inner: bool = False
) -> str:
    """A listing that starts with the ``needed`` things (name -> the pattern of its entry), then maybe a few others.

    The needed things come first, and any other is a whole thing: a name that is none of theirs, nor
    ``besides``, nor ``nothing``, with its notes (none ``inner``, in what a container lists). Let free
    before them, or to repeat them, a small model writes ``nothing`` and on past what it must name, or
    lists the same thing again and again, until its answer is cut.
    """
    name = _name_except(frozenset({"nothing", *needed, *besides}), starting=True)
    other = name if inner else rf"{name}( \({_INNER}\))?"
    if not needed and inner:  # what a container shows when opened: a thing or two
        return f"{other}(, {other})?"
    if not needed:  # a room's things run freer, but name none of ``besides``
        return f"(nothing|{other}(, {other}){{0,7}})" if besides else _LISTING
    return ", ".join(needed.values()) + f"(, {other}){{0,{1 if inner else 2}}}"


def _thing(name: str, need: ThingNeed) -> str:
    """One listed thing as ``need`` wants it (:class:`~.plan.ThingNeed`)."""
    quoted = re.escape(name)
    if need.kind == "object":
        return rf"{quoted}( \({_INNER}\))?"
    if need.state in ("closed", "locked"):
        return rf"{quoted} \({need.state}\)"
    if need.holds:
        held = _listing_with({h: re.escape(h) for h in need.holds}, frozenset({name}), inner=True)
        container, supporter = rf"{quoted} \(open, holds: {held}\)", rf"{quoted} \(on: {held}\)"
    else:
        container, supporter = (
            rf"{quoted} \(open, (holds: {_INNER}|empty)\)",
            rf"{quoted}( \(on: {_INNER}\))?",
        )
    if need.kind == "container":
        return container
    if need.kind == "supporter":
        return supporter
    return f"({container}|{supporter})"


def _room(back: str, door: tuple[str, str], reveal: Reveal) -> str:
    """A new room's lines: its name, exits and things as ``reveal`` needs them (only the way back, when none).

    The way back is the exit the move went through, seen from the other side: ``door`` (its name and
    state, ``("", "")`` for none), as one door joins two rooms in TextWorld. Things the instruction
    places in another room (``reveal.elsewhere``) are not listed here.
    """
    needs = reveal.room or RoomNeeds()
    name = re.escape(needs.name) if needs.name else _name_except(reveal.avoid)
    exits = {**needs.exits, back: door}
    things = {thing: _thing(thing, needs.things[thing]) for thing in sorted(needs.things)}
    held = frozenset(h for need in needs.things.values() for h in need.holds)
    listed = _exits_with(exits, reveal.extra_exits)
    return rf"Room: {name}\nExits: {listed}\nHere: {_listing_with(things, held | (reveal.elsewhere - set(things)))}"


def step_pattern(
    state: str,
    action: str,
    world: str,
    seen: Sequence[str] = (),
    *,
    whole_layout: bool = False,
    reveal: Reveal | None = None,
) -> str | None:
    """The form of an answer that reveals something, as a regular expression; ``None`` for any other step.

    For the steps :func:`step_outcomes` cannot write out, because they show what the episode has not:

    * a move through an open exit into a room the layout does not know: the step succeeds (it goes
      on, wins or loses), and the new room has its name, its things, and among its exits the way back;
    * opening a closed container whose contents are not known: the rest of its line stays as it was,
      and the container reads ``open`` and holds something or is ``empty``.

    The model writes the room or the contents; the pattern keeps its invention consistent with
    what the episode showed (a room with no way back would contradict the move that entered it),
    and with what the quest's instruction says of it (``reveal``, :func:`~.plan.reveal_needs`):
    the walkthrough's next room with its name, its way on and the things the text names, a
    container holding what the text takes from it, and no new room named as another.
    ``whole_layout`` as for :func:`step_outcomes`.
    """
    parsed = parse_state(state)
    if parsed is None or step_outcomes(state, action, world, seen, whole_layout=whole_layout) is not None:
        return None
    reveal = reveal or Reveal()
    if action.startswith("go "):
        way = action[3:]
        back = _OPPOSITE.get(way)
        if back is None:
            return None
        door = next(((n, s) for d, n, s in exits_of(parsed.lines["Exits"]) if d == way), ("", ""))
        return rf"{_ENDING}\n{_room(back, door, reveal)}"
    if action.startswith("open "):
        name = action[len("open ") :]
        for key in ("Here", "Carrying"):
            things = _things(parsed.lines[key])
            thing = _find(things, name)
            if thing is None or thing.state != "closed":
                continue
            thing.state, thing.held, thing.word = "open", [_Thing("\x00")], "holds"
            before, _, after = _render(things).partition("holds: \x00")
            wanted = {t: re.escape(t) for t in reveal.contents}
            inside = f"holds: {_listing_with(wanted, frozenset({name}), inner=True)}" + (
                "" if wanted else "|empty"
            )
            return rf"{_ENDING}\n{key}: {re.escape(before)}({inside}){re.escape(after)}"
    return None
