"""A TextWorld quest's winning condition, read from the quest's instruction text.

In the learned setting the simulator never sees the game's goal facts, only the instruction the agent
reads, so whether a step wins was left to the experience model's result line, and the model claims
wins the game would not pay. The instruction already says what wins: TextWorld writes it from the
quest's walkthrough with the grammar of its ``house_instruction.twg`` files, one sentence per
command, and a quest is won by the postconditions of its last command. So the last sentence that
names a command is the winning condition::

    >>> instruction_goal("First, travel west. Then, eat the loaf of bread. That's it!")
    Goal(kind='eaten', thing='loaf of bread', holder='', room='')

:func:`goal_met` checks such a condition against the canonical states of an episode
(:mod:`dreamgym_env.domains.textworld.state`). A curriculum quest in its one-sentence format reads
the same way when its last command names its things. Text this parser does not know (other words, a
pronoun for a thing, a last command that moves the player, whose room the text does not name) gives
``None``, and the caller keeps another judge. Pure string functions: no TextWorld install needed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dreamgym_env.domains.textworld.state import (
    CanonicalState,
    _item_parts,
    exits_of,
    parse_state,
    split_things,
)

GOAL_KINDS: frozenset[str] = frozenset(
    {"carried", "in", "on", "dropped", "eaten", "open", "closed", "locked", "unlocked"}
)
"""What a quest's last command makes true: ``carried`` (take), ``in`` (insert), ``on`` (put),
``dropped`` (on the floor of a room), ``eaten``, and a container's or door's ``open``, ``closed``,
``locked`` or ``unlocked`` (no longer locked: closed, or opened since)."""


@dataclass(frozen=True)
class Goal:
    """A winning condition as the instruction names it.

    ``thing`` is what the condition is about (the object taken, the container or door opened);
    ``holder`` the container or supporter of ``in`` and ``on``; ``room`` the room the text places the
    command in, when it names one (``""`` otherwise).
    """

    kind: str
    thing: str
    holder: str = ""
    room: str = ""


# The verb synonyms of TextWorld's instruction grammar (house_instruction.twg), longest first.
_MAKE_SURE = r"(?:make absolutely sure|make sure|make it so|look and see|doublecheck|assure|ensure|check)"
_TAKE = r"(?:take|retrieve|recover|pick up|pick-up|lift)"
_INSERT = r"(?:insert|put|place|deposit)"
_PUT = r"(?:put|place|sit|rest)"
_DROP = r"(?:place|drop|ditch|throw|toss|deposit)"
_STATES = {
    "unlocked": "unlocked",
    "locked": "locked",
    "wide open": "open",
    "opened": "open",
    "open": "open",
    "ajar": "open",
    "closed": "closed",
    "shut": "closed",
}
_N = r".+?"  # a name, as short as the rest of the sentence allows

# (kind, form) in the order they are tried: the more specific form first ("... into the chest to lock
# it" before "put X into Y", "place X on the floor of R" before "place X on S", and "place X on S
# inside the R" before "place X inside C"). A form matches a whole clause, to the sentence's end: from
# its start, or after a comma, "to", "please", "you can" or "you could" (what the grammar puts before a command),
# or "and" or "then" (what joins the commands of a one-sentence quest). ``state`` takes its kind from
# _STATES.
_FORMS: tuple[tuple[str, str], ...] = (
    ("unlocked", rf"insert the (?P<key>{_N}) into the (?P<thing>{_N})'s lock to unlock it"),
    ("locked", rf"{_INSERT} the (?P<key>{_N}) into the (?P<thing>{_N}) to lock it"),
    ("unlocked", rf"unlock the (?P<thing>{_N})(?: with the (?P<key>{_N}))?"),
    ("locked", rf"lock the (?P<thing>{_N})(?: with the (?P<key>{_N}))?"),
    (
        "state",
        rf"{_MAKE_SURE}(?: that)? the (?P<thing>{_N}) is (?P<state>{'|'.join(_STATES)})"
        rf"(?: with the (?P<key>{_N}))?",
    ),
    ("open", rf"open the (?P<thing>{_N})"),
    ("closed", rf"close the (?P<thing>{_N})"),
    ("eaten", rf"eat the (?P<thing>{_N})"),
    ("dropped", rf"{_DROP} the (?P<thing>{_N}) on the floor of the (?P<room>{_N})"),
    ("carried", rf"{_TAKE} the (?P<thing>{_N}) from the floor of the (?P<room>{_N})"),
    ("carried", rf"{_TAKE} the (?P<thing>{_N}) (?:from|in|that's in) the (?P<holder>{_N})"),
    ("on", rf"{_PUT} the (?P<thing>{_N}) on the (?P<holder>{_N})"),
    ("in", rf"{_INSERT} the (?P<thing>{_N}) (?:into|inside) the (?P<holder>{_N})"),
)
_CLAUSE = r"(?:^|, |\bto |\bplease |\byou can |\byou could |\band |\bthen )"
_COMPILED = tuple((kind, re.compile(rf"{_CLAUSE}{form}$", re.IGNORECASE)) for kind, form in _FORMS)

# tw-simple's brief goal names only the food; the quest puts it on the stove.
_BRIEF = re.compile(r"it's only missing a grilled (?P<thing>.+?)\.$", re.IGNORECASE)
_IN_ROOM = re.compile(r"(?P<name>.+?) (?:in|within|inside) the (?P<room>.+)")
_NAME = re.compile(r"[\w'-]+(?: [\w'-]+)*")
_SEVERAL = re.compile(r"\b(?:AND|OR)\b")  # TextWorld's joins of several quests or ways to win


@functools.lru_cache(maxsize=1024)
def instruction_goal(instruction: str) -> Goal | None:
    """The condition that wins the quest ``instruction`` describes, or ``None`` when it cannot be read.

    The last sentence that is not flavour (TextWorld's closing lines all end with ``!`` or ``?``) must
    be a command of the grammar, finished with its full stop as the grammar writes every command: a
    quest whose last command does not read as one is not judged, rather than judged by an earlier
    command that does not end it, and text that stops without a full stop (cut short, or not the
    grammar's) may name a thing only in part. Text that joins several quests or
    ways to win (``AND``, ``OR``) is not read either: its last sentence is one of them. Cached: a
    simulator reads the same instruction at every step of an episode.
    """
    text = " ".join(instruction.split())
    if not text or _SEVERAL.search(text):
        return None
    brief = _BRIEF.search(text)
    if brief:
        return _goal("on", brief.group("thing"), "stove")
    sentences = re.split(r"(?<=[.!?]) ", text)
    while sentences and sentences[-1].endswith(("!", "?")):
        sentences.pop()
    if not sentences or not sentences[-1].endswith("."):
        return None
    return command_goal(sentences[-1].removesuffix("."))


def command_goal(clause: str) -> Goal | None:
    """The goal of the first form that reads ``clause`` with whole names (none spans two commands)."""
    for kind, form in _COMPILED:
        match = form.search(clause)
        names = match.groupdict() if match else {}
        key = names.get("key")
        if match is None or (key and not _NAME.fullmatch(key)):
            continue
        if kind == "state":
            kind = _STATES[names["state"].lower()]
        goal = _goal(kind, names["thing"], names.get("holder") or "", names.get("room") or "")
        if goal is not None:
            return goal
    return None


def _goal(kind: str, thing: str, holder: str = "", room: str = "") -> Goal | None:
    """A goal with the room split off the name it qualifies (``box inside the chamber``); ``None`` for bad names."""
    placed = holder if kind in ("carried", "in", "on") else thing
    named = _IN_ROOM.fullmatch(placed)
    if named and not room:
        room = named.group("room")
        placed = named.group("name")
        if kind in ("carried", "in", "on"):
            holder = placed
        else:
            thing = placed
    if not all(_NAME.fullmatch(n) and " and " not in n for n in (thing, holder, room) if n):
        return None
    return Goal(kind, thing, holder, room)


def goal_met(goal: Goal, states: Sequence[str]) -> bool:
    """Whether the last of an episode's canonical ``states`` (oldest first) shows ``goal`` met.

    What a state does not show (a closed container's contents, a room out of sight) is not met, and a
    goal placed in a named room is met only there (TextWorld's conditions hold the player there
    too). ``eaten`` is read from the last two states: the thing was carried, and is gone from view in
    the same room, in neither the inventory nor anything there.
    """
    now = parse_state(states[-1]) if states else None
    if now is None:
        return False
    if goal.kind == "eaten":
        before = parse_state(states[-2]) if len(states) > 1 else None
        return before is not None and _eaten(goal.thing, before, now)
    if goal.room and goal.kind != "carried" and not _same(now.lines["Room"], goal.room):
        return False
    if goal.kind == "carried":
        return any(_same(name, goal.thing) for name, _, _ in _top(now.lines["Carrying"]))
    if goal.kind == "dropped":
        return any(_same(name, goal.thing) for name, _, _ in _top(now.lines["Here"]))
    if goal.kind in ("in", "on"):
        return any(
            _same(name, goal.holder) and any(_same(h, goal.thing) for h in held) and _holds(status, goal.kind)
            for name, status, held in _every(now)
        )
    status = _status(now, goal.thing)
    return status == goal.kind or (goal.kind == "unlocked" and status in ("closed", "open"))


def _same(name: str, other: str) -> bool:
    return name.strip().lower() == other.strip().lower()


def _holds(status: str, kind: str) -> bool:
    """A container shows what it holds only when open; a supporter always does."""
    return status == "open" if kind == "in" else status in ("", "on")


def _top(listing: str) -> Iterator[tuple[str, str, list[str]]]:
    """``(name, status, names it holds)`` of each top-level item of a listing."""
    for item in split_things(listing):
        name, notes, word, held = _item_parts(item)
        status = next((n for n in notes if n in ("open", "closed", "locked")), "on" if word == "on" else "")
        yield name, status, [_item_parts(h)[0] for h in split_things(held)]


def _every(state: CanonicalState) -> Iterator[tuple[str, str, list[str]]]:
    """``(name, status, names it holds)`` of every item in view, at any depth (a box on a table)."""
    todo = [state.lines["Here"], state.lines["Carrying"]]
    while todo:
        listing = todo.pop()
        for item in split_things(listing):
            todo.append(_item_parts(item)[3])
        yield from _top(listing)


def _status(state: CanonicalState, name: str) -> str:
    """``open``, ``closed`` or ``locked`` for a door or container in view, ``""`` when none is."""
    for _, door, door_state in exits_of(state.lines["Exits"]):
        if door and _same(door, name):
            return door_state
    return next((status for item, status, _ in _every(state) if _same(item, name)), "")


def _eaten(thing: str, before: CanonicalState, now: CanonicalState) -> bool:
    """Carried before, and in the same room now in view nowhere: a drop or a put would show it."""
    carried = any(_same(name, thing) for name, _, _ in _top(before.lines["Carrying"]))
    in_view = any(_same(name, thing) for name, _, _ in _every(now))
    return carried and not in_view and _same(before.lines["Room"], now.lines["Room"])
