"""TextWorld's canonical state read back from its text: the lines a step changes, and the commands it admits.

:mod:`dreamgym_env.domains.textworld.facts` writes a state from the engine's facts::

    Done.
    Room: kitchen
    Exits: east, north (wooden door: closed)
    Here: chest (open, holds: apple, key), table (on: knife)
    Carrying: nothing

This module reads such text, for two jobs of the simulator:

- **Answers that carry only what changed** (:func:`state_changes`, :func:`complete_state`). A step
  changes one or two of the four keyed lines (``take`` changes ``Here`` and ``Carrying``; ``look``
  none), so the experience model writes the result line and the changed lines, and the domain
  completes the state from the current one. The model no longer has to copy lines it leaves alone,
  the error that dominated full-state answers, and the answer is a quarter of the length.
- **The commands a state admits** (:func:`admissible_commands`), listed the way TextWorld lists them,
  from the state and the game's layout (which things are supporters or food, which key opens what).
  They follow from the state by the game's rules, so the model is not asked for them.
- **The part of the layout a step can reach** (:func:`nearby_facts`): the rooms behind the current
  room's exits, what its closed containers hold, which keys fit its locks. A move is then one lookup
  by direction, instead of two across the whole map (the room's exit on the map, then that room's
  line), which a small model trained from scratch does not learn.

Pure string functions: no TextWorld install needed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_STATE_KEYS: tuple[str, ...] = ("Room", "Exits", "Here", "Carrying")
"""The keyed lines of a canonical state, in order."""

_ROOM_KEYS = ("Room", "Exits", "Here")
"""The lines that describe a room: a move answers all three."""


class CanonicalState:
    """A canonical state's parts: the result line (``""`` in a first state), the keyed lines, the quest."""

    def __init__(self, result: str, lines: dict[str, str], quest: str = "") -> None:
        self.result = result
        self.lines = lines
        self.quest = quest

    def render(self) -> str:
        """The state's text (without the quest: only a first state has one, and it is never rebuilt)."""
        head = [self.result] if self.result else []
        return "\n".join(head + [f"{key}: {self.lines[key]}" for key in _STATE_KEYS])


def _keyed(line: str) -> tuple[str, str] | None:
    key, sep, value = line.partition(": ")
    return (key, value) if sep and key in _STATE_KEYS else None


def parse_state(text: str) -> CanonicalState | None:
    """The parts of a canonical state, or ``None`` when ``text`` is not one (prose, a partial answer)."""
    body, _, quest = text.strip().partition("\n\n")
    rows = body.split("\n")
    result = "" if _keyed(rows[0]) else rows[0].strip()
    lines: dict[str, str] = {}
    for row in rows[1:] if result else rows:
        keyed = _keyed(row)
        if keyed is None or keyed[0] in lines:
            return None
        lines[keyed[0]] = keyed[1].strip()
    if list(lines) != list(_STATE_KEYS):
        return None
    return CanonicalState(result, lines, quest.strip())


def state_changes(state: str, next_state: str) -> str:
    """What an answer says for ``next_state`` after ``state``: the result line and the keyed lines that differ.

    A move gives the new room's ``Room``, ``Exits`` and ``Here`` lines even where one reads as the old
    room's did: the model then copies the room's lines from the layout, instead of also comparing
    them with the current ones. When either text is not a canonical state, the answer is the whole
    next state.
    """
    before, after = parse_state(state), parse_state(next_state)
    if before is None or after is None or not after.result:
        return next_state
    moved = after.lines["Room"] != before.lines["Room"]
    changed = [
        f"{key}: {after.lines[key]}"
        for key in _STATE_KEYS
        if after.lines[key] != before.lines[key] or (moved and key in _ROOM_KEYS)
    ]
    return "\n".join([after.result, *changed])


def complete_state(state: str, answer: str) -> str:
    """The next state an answer stands for: ``state`` with the answer's result line and changed lines.

    An answer with all four keyed lines is a whole state and stands for itself; so does any answer
    after a state that is not canonical (a prose state, which has no lines to keep).

    Raises:
        ValueError: the answer has no result line, repeats a line, or has a line that is not one of
            :data:`_STATE_KEYS`; the message says which.
    """
    before = parse_state(state)
    if before is None or parse_state(answer) is not None:
        return answer
    rows = [row for row in answer.strip().split("\n") if row.strip()]
    if not rows or _keyed(rows[0]):
        raise ValueError(
            "the answer must start with the step's result line (Done., Nothing happens., You won., You lost.)"
        )
    lines = dict(before.lines)
    seen: set[str] = set()
    for row in rows[1:]:
        keyed = _keyed(row)
        if keyed is None:
            raise ValueError(
                f"{row!r} is not a state line; changed lines start with one of {', '.join(_STATE_KEYS)}"
            )
        if keyed[0] in seen:
            raise ValueError(f"the answer gives the {keyed[0]} line twice")
        seen.add(keyed[0])
        lines[keyed[0]] = keyed[1].strip()
    placed = set().union(*(names_in(lines[key]) for key in seen if key in _PLACES))
    for key in _PLACES:
        if key not in seen:
            lines[key] = without(lines[key], placed)
    return CanonicalState(rows[0].strip(), lines).render()


_PLACES = ("Here", "Carrying")
"""The lines that place things: a thing is in one of them, at one depth."""


def names_in(listing: str) -> set[str]:
    """Every thing a listing names, at any depth: ``"chest (open, holds: key), apple"`` -> ``{chest, key, apple}``."""
    names: set[str] = set()
    for item in split_things(listing):
        name, _, _, held = _item_parts(item)
        names |= {name} | names_in(held)
    return names


def without(listing: str, names: set[str]) -> str:
    """``listing`` less the things in ``names``, wherever they lie; a container left empty reads ``empty``.

    A thing is in one place. When an answer gives the line a thing moved to but not the line it left
    (``put key on table`` answered with ``Here`` only), the kept line still shows it: taking it out
    there completes the move the answer described.
    """
    kept = []
    for item in split_things(listing):
        name, notes, word, held = _item_parts(item)
        if name in names:
            continue
        if names & names_in(held):
            rest = without(held, names)
            if rest != "nothing":
                notes = [*notes, f"{word}: {rest}"]
            elif word == "holds":
                notes = [*notes, "empty"]
            item = f"{name} ({', '.join(notes)})" if notes else name
        kept.append(item)
    return ", ".join(kept) or "nothing"


def _item_parts(item: str) -> tuple[str, list[str], str, str]:
    """An item's name, its other notes (``open``...), and ``holds`` or ``on`` with the listing it heads."""
    name, _, inside = item.partition(" (")
    parts = split_things(inside.removesuffix(")"))
    for i, part in enumerate(parts):
        word, sep, rest = part.partition(": ")
        if sep and word in ("holds", "on"):  # the list runs to the end of the notes
            return name.strip(), parts[:i], word, ", ".join([rest, *parts[i + 1 :]])
    return name.strip(), parts, "", ""


def split_things(listing: str) -> list[str]:
    """The top-level items of a listing: ``"chest (open, holds: a, b), key"`` -> ``["chest (open, holds: a, b)", "key"]``.

    ``"nothing"`` and ``"none"`` list no items.
    """
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in listing:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    items.append("".join(current).strip())
    return [item for item in items if item and item not in ("nothing", "none")]


def thing_of(item: str) -> tuple[str, str, list[str]]:
    """An item's name, its kind as the text shows it, and what it holds or supports.

    The kind is ``open``, ``closed`` or ``locked`` for a container, ``on`` for a supporter with
    something on it, ``""`` for a bare name (a portable thing, or a supporter with nothing on it).
    """
    name, notes, word, held = _item_parts(item)
    kind = "on" if word == "on" else next((n for n in notes if n in ("open", "closed", "locked")), "")
    return name, kind, [_item_parts(h)[0] for h in split_things(held)]


def world_part(world: str, label: str) -> dict[str, str]:
    """``Keys: door: key; chest: key2`` (one line of a layout) as ``{"door": "key", ...}``."""
    for line in world.split("\n"):
        if line.startswith(f"{label}: "):
            pairs = (part.partition(": ") for part in line[len(label) + 2 :].split("; "))
            return {name.strip(): value.strip() for name, _, value in pairs}
    return {}


def _lock_commands(name: str, state: str, keys: Iterable[str | None], carried: Iterable[str]) -> list[str]:
    fitting = [key for key in keys if key is not None and key in carried]
    if state == "locked":
        return [f"unlock {name} with {key}" for key in fitting]
    return [f"lock {name} with {key}" for key in fitting] if state == "closed" else []


def admissible_commands(state: str, world: str = "", *, any_key: bool = False) -> list[str] | None:
    """The commands TextWorld admits in ``state``, sorted, or ``None`` when the state is not canonical.

    ``world`` is the game's layout (:func:`dreamgym_env.domains.textworld.facts.render_world`): its
    ``Keys`` line says which key opens what, its ``Kinds`` line which things are supporters or food.
    Without it, a bare name counts as a portable thing and nothing is food; no key fits, unless
    ``any_key``: then every carried thing may be tried on every lock (a learned dream, which does not
    know the keys, lists them all and answers whether one fits).
    """
    parsed = parse_state(state)
    if parsed is None:
        return None
    keys = world_part(world, "Keys")
    kinds = world_part(world, "Kinds")
    supporters = set(split_things(kinds.get("supporters", "")))
    food = set(split_things(kinds.get("food", "")))
    carried = [thing_of(item)[0] for item in split_things(parsed.lines["Carrying"])]

    def keys_of(lock: str) -> list[str | None]:
        return list(carried) if any_key and not keys else [keys.get(lock)]

    commands = {"look", "inventory"}
    for direction, door_name, door_state in exits_of(parsed.lines["Exits"]):
        if not door_name:
            commands.add(f"go {direction}")
            continue
        commands.add(f"examine {door_name}")
        if door_state == "open":
            commands |= {f"go {direction}", f"close {door_name}"}
        elif door_state == "closed":
            commands.add(f"open {door_name}")
        commands.update(_lock_commands(door_name, door_state, keys_of(door_name), carried))
    for item in split_things(parsed.lines["Here"]):
        name, kind, held = thing_of(item)
        commands.add(f"examine {name}")
        if kind in ("open", "closed", "locked"):  # a container
            commands.update(_lock_commands(name, kind, keys_of(name), carried))
            if kind == "closed":
                commands.add(f"open {name}")
            elif kind == "open":
                commands.add(f"close {name}")
                commands |= {f"insert {c} into {name}" for c in carried}
        elif kind == "on" or name in supporters:
            commands |= {f"put {c} on {name}" for c in carried}
        else:
            commands.add(f"take {name}")
        for inner in held:
            commands |= {f"take {inner} from {name}", f"examine {inner}"}
    for name in carried:
        commands |= {f"drop {name}", f"examine {name}"}
        if name in food:
            commands.add(f"eat {name}")
    return sorted(commands)


def layout_of(world: str) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """A layout's map (room -> direction -> room) and room lines (room -> ``Exits: .. | Here: ..``)."""
    links: dict[str, dict[str, str]] = {}
    rooms: dict[str, str] = {}
    for line in world.split("\n"):
        if line.startswith("Map: "):
            for entry in line[5:].split("; "):
                room, _, exits = entry.partition(": ")
                links[room] = dict(e.split(" ", 1) for e in exits.split(", ") if " " in e)
        elif line.startswith("Room: "):
            name, _, rest = line[6:].partition(" | ")
            rooms[name] = rest
    return links, rooms


def exits_of(listing: str) -> list[tuple[str, str, str]]:
    """``east (screen door: open), west`` -> ``[("east", "screen door", "open"), ("west", "", "")]``."""
    parts = []
    for item in split_things(listing):
        direction, _, door = item.partition(" (")
        name, _, state = door.removesuffix(")").partition(": ")
        parts.append((direction, name, state))
    return parts


def _door_states(exits: str) -> dict[str, str]:
    """``east (screen door: open), west`` -> ``{"screen door": "open"}``."""
    return {name: state for _, name, state in exits_of(exits) if name}


def nearby_facts(state: str, world: str, seen: Sequence[str] = (), action: str | None = None) -> str:
    """What the simulator knows about the rooms and things one step away from ``state``, or ``""``.

    The layout (``world``) is the game's start; ``seen`` are the episode's earlier states, oldest
    first, and what they show is newer: a room reads as the episode last showed it (what was dropped
    or taken there since the start), and a door as the latest state that showed it (one door joins
    two rooms, so opening it in one changes the other's exit).

    One line per exit of the current room with the room it leads to, as a state shows it on arrival
    (``north: Room: hall | Exits: south (oak door: open) | Here: bed``); then ``Inside:`` what the
    closed containers here or carried hold, and ``Keys:`` which key fits a lock here.

    With ``action``, only what that action can need: a move's one room, and the contents and keys of
    the things the action names (``""`` for a step that needs none). A move is then a copy of the one
    line given, and the prompt is shorter.
    """
    parsed = parse_state(state)
    if parsed is None or not world:
        return ""
    links, rooms = layout_of(world)
    doors: dict[str, str] = {}
    for earlier in (*seen, state):
        shown = parse_state(earlier)
        if shown is not None:
            rooms[shown.lines["Room"]] = f"Exits: {shown.lines['Exits']} | Here: {shown.lines['Here']}"
            doors.update(_door_states(shown.lines["Exits"]))
    lines = []
    for direction, target in links.get(parsed.lines["Room"], {}).items():
        line = rooms.get(target)
        if line is not None and (action is None or action == f"go {direction}"):
            lines.append(f"{direction}: Room: {target} | {_with_doors(line, doors)}")
    things = [thing_of(item) for key in ("Here", "Carrying") for item in split_things(parsed.lines[key])]
    names = {name for name, _, _ in things} | set(_door_states(parsed.lines["Exits"]))
    closed = {name for name, kind, _ in things if kind in ("closed", "locked")}
    if action is not None:
        names = {name for name in names if _names(action, name)}
    inside = {k: v for k, v in world_part(world, "Inside").items() if k in closed and k in names}
    keys = {k: v for k, v in world_part(world, "Keys").items() if k in names}
    held = sorted((name, listing) for name, listing in inside.items() if listing)
    if held:
        lines.append(f"Inside: {'; '.join(f'{k}: {v}' for k, v in held)}")
    if keys:
        lines.append(f"Keys: {'; '.join(f'{k}: {v}' for k, v in sorted(keys.items()))}")
    return "\n".join(lines)


_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
"""The way back through an exit: TextWorld's rooms join in pairs of opposite directions."""


def dream_layout(states: Sequence[str], actions: Sequence[str]) -> str:
    """The layout an episode has shown itself, in the form of a game's layout (``Map:``, ``Inside:``).

    ``states`` are the episode's states, first to current, and ``actions`` the ``len(states) - 1``
    actions between them. A move that changed the room joins the two rooms both ways; a container
    once shown open keeps, once closed, what it held then. This is what a learned dream knows of its
    own world (it never sees the game's): given back to the model through :func:`nearby_facts`, a
    revisit reads the room as the dream showed it, not as the model might invent it again.
    """
    links: dict[str, dict[str, str]] = {}
    inside: dict[str, str] = {}
    before = None
    for i, text in enumerate(states):
        parsed = parse_state(text)
        if parsed is None:
            before = None
            continue
        action = actions[i - 1] if i else ""
        if before is not None and action.startswith("go "):
            direction, room, previous = action[3:], parsed.lines["Room"], before.lines["Room"]
            if room != previous and direction in _OPPOSITE:
                links.setdefault(previous, {})[direction] = room
                links.setdefault(room, {}).setdefault(_OPPOSITE[direction], previous)
        for key in ("Here", "Carrying"):
            for item in split_things(parsed.lines[key]):
                name, notes, word, listing = _item_parts(item)
                if "open" in notes:  # what it holds now (nothing, if it reads "empty")
                    inside[name] = listing if word == "holds" else ""
        before = parsed
    lines = []
    if links:
        rooms = "; ".join(
            f"{room}: {', '.join(f'{d} {t}' for d, t in exits.items())}" for room, exits in links.items()
        )
        lines.append(f"Map: {rooms}")
    held = sorted((name, listing) for name, listing in inside.items() if listing)
    if held:
        lines.append(f"Inside: {'; '.join(f'{k}: {v}' for k, v in held)}")
    return "\n".join(lines)


def _names(action: str, thing: str) -> bool:
    """Whether ``action`` names ``thing`` (as a whole name: "key" is not named by "take keycard")."""
    return re.search(rf"(?<![\w'’.:-]){re.escape(thing)}(?![\w'’.:-])", action) is not None


def _with_doors(line: str, doors: dict[str, str]) -> str:
    """A room line whose doors read as ``doors`` says (their latest known states)."""
    for door, door_state in doors.items():
        for old in ("open", "closed", "locked"):
            line = line.replace(f"({door}: {old})", f"({door}: {door_state})")
    return line


_FAMILIES = {
    "look": "observe",
    "inventory": "observe",
    "examine": "observe",
    "goal": "observe",
    **{
        verb: verb
        for verb in ("go", "take", "drop", "put", "insert", "open", "close", "lock", "unlock", "eat")
    },
}
_NOTHING_HAPPENS = "Nothing happens."


def step_kind(seen: Sequence[str], state: str, action: str, next_state: str) -> tuple[str, str]:
    """A real step's verb family and kind, for scoring a simulator step by step.

    The family is the command's verb (``look``, ``inventory``, ``examine`` are ``observe``; verbs of
    cooking games ``other``). The kind says what a simulator could know of the outcome:

    * ``observe``: a command that never changes the world;
    * ``no_change``: the game refused it or nothing happened (``Nothing happens.``);
    * ``revealing``: the outcome shows what the episode had not shown before: a room entered for the
      first time, a container opened whose contents it had never seen. A learned dream invents these;
    * ``determined``: any other change, which follows from what the episode has shown (take, drop,
      put, insert, eat, open or close or lock or unlock of what was seen, a room entered again);
    * ``unknown``: a state that is not canonical.

    ``seen`` are the episode's states before ``state``.
    """
    family = _FAMILIES.get(action.split(" ", 1)[0], "other")
    before, after = parse_state(state), parse_state(next_state)
    if before is None or after is None:
        return family, "unknown"
    if family == "observe":
        return family, "observe"
    if after.result == _NOTHING_HAPPENS:
        return family, "no_change"
    shown = [p for p in (parse_state(text) for text in (*seen, state)) if p is not None]
    if family == "go" and after.lines["Room"] not in {p.lines["Room"] for p in shown}:
        return family, "revealing"
    if family == "open":
        target = action[len("open ") :]
        opened = [thing_of(i) for key in _PLACES for i in split_things(after.lines[key])]
        if any(name == target and kind == "open" for name, kind, _ in opened) and not any(
            _shown_open(p, target) for p in shown
        ):
            return family, "revealing"
    return family, "determined"


def _shown_open(state: CanonicalState, name: str) -> bool:
    """Whether ``state`` shows the container ``name`` open (so what it holds was seen)."""
    return any(
        thing_of(item)[:2] == (name, "open") for key in _PLACES for item in split_things(state.lines[key])
    )


def consistent_reveal(state: str, action: str, predicted: str, real: str) -> bool:
    """Whether a predicted revealing step agrees with the real one wherever the real one is determined.

    The result line and what is carried must match; a move must enter another room with an exit back
    the way it came; an ``open`` must leave the room as it was, bar what the container shows. The
    revealed room or contents may be the dream's own invention.
    """
    before, guess, truth = parse_state(state), parse_state(predicted), parse_state(real)
    if before is None or guess is None or truth is None:
        return False
    if guess.result != truth.result or guess.lines["Carrying"] != truth.lines["Carrying"]:
        return False
    if truth.lines["Room"] != before.lines["Room"]:  # a move
        back = _OPPOSITE.get(action.removeprefix("go "))
        doors = {direction for direction, _, _ in exits_of(guess.lines["Exits"])}
        return guess.lines["Room"] != before.lines["Room"] and back in doors
    return guess.lines["Room"] == truth.lines["Room"] and guess.lines["Exits"] == truth.lines["Exits"]
