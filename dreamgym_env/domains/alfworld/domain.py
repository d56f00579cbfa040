"""ALFWorld: household tasks in TextWorld rooms built from ALFRED scenes.

This module owns the room layouts (:data:`ROOM_RECEPTACLES`, :func:`_render_room`) and the first
state; the task types, goal phrasings, task ids and task files are in
:mod:`~dreamgym_env.domains.alfworld.tasks` (:meth:`ALFWorldDomain.load_tasks`). What uses them: the
real env in :mod:`dreamgym_env.domains.alfworld.engine`; the ReAct transcript import in
:mod:`dreamgym_env.buffer.loaders.alfworld`; the curriculum's ``ALFWORLD_FORMAT`` and
``validate_alfworld`` (named in the domain table, :data:`dreamgym_env.domains.BUILTIN_DOMAINS`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from dreamgym_env.domains import BUILTIN_DOMAINS
from dreamgym_env.domains.alfworld.tasks import (
    ALFWORLD_TOOLS,
    load_alfworld_react_tasks,
    load_alfworld_traj_data,
    make_alfworld_task,
)
from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.errors import DataFormatError
from dreamgym_env.records import Task

ROOM_RECEPTACLES: dict[str, dict[str, tuple[int, int]]] = {
    "kitchen": {
        "cabinet": (4, 14),
        "coffeemachine": (1, 1),
        "countertop": (1, 3),
        "diningtable": (0, 1),
        "drawer": (2, 10),
        "fridge": (1, 1),
        "garbagecan": (1, 1),
        "microwave": (1, 1),
        "shelf": (0, 3),
        "sinkbasin": (1, 1),
        "stoveburner": (2, 4),
        "toaster": (1, 1),
    },
    "bathroom": {
        "bathtubbasin": (0, 1),
        "cabinet": (1, 4),
        "countertop": (1, 1),
        "drawer": (0, 4),
        "garbagecan": (1, 1),
        "handtowelholder": (1, 2),
        "shelf": (0, 2),
        "sinkbasin": (1, 2),
        "toilet": (1, 1),
        "toiletpaperhanger": (1, 1),
        "towelholder": (1, 1),
    },
    "bedroom": {
        "armchair": (0, 1),
        "bed": (1, 1),
        "desk": (0, 2),
        "drawer": (2, 6),
        "dresser": (0, 1),
        "garbagecan": (1, 1),
        "laundryhamper": (0, 1),
        "safe": (0, 1),
        "shelf": (1, 6),
        "sidetable": (1, 2),
    },
    "livingroom": {
        "armchair": (0, 2),
        "cabinet": (0, 4),
        "coffeetable": (1, 2),
        "diningtable": (0, 1),
        "drawer": (1, 6),
        "dresser": (0, 1),
        "garbagecan": (1, 1),
        "ottoman": (0, 1),
        "safe": (0, 1),
        "shelf": (0, 6),
        "sidetable": (1, 3),
        "sofa": (1, 1),
        "tvstand": (0, 1),
    },
}
"""Receptacle kinds per ALFRED room, with the (min, max) count a generated room draws from."""

LAMPS: tuple[str, ...] = ("desklamp", "floorlamp")
"""The light sources of ``look_at_obj_in_light`` tasks."""

LAMP_STANDS: tuple[str, ...] = ("desk", "sidetable")
"""Where a lamp stands: a look-at task's room needs one of these."""


def _render_room(receptacles: Sequence[str], task_text: str) -> str:
    """The opening observation of an ALFWorld game.

    Args:
        receptacles: Receptacle names with their numbers (``"cabinet 1"``), in display order.
        task_text: The goal sentence, e.g. ``"put a clean mug in coffeemachine."``.
    """
    seen = [f"a {r}" for r in receptacles]
    listing = ", ".join(seen[:-1]) + f", and {seen[-1]}" if len(seen) > 1 else "".join(seen)
    return (
        f"You are in the middle of a room. Looking quickly around you, you see {listing}.\n"
        f"Your task is to: {task_text}"
    )


def _listing_order(counts: Mapping[str, int]) -> list[str]:
    """Receptacles as ALFWorld lists them: kinds alphabetically, numbers counting down."""
    return [f"{kind} {n}" for kind in sorted(counts) for n in range(counts[kind], 0, -1)]


_ROOM_LINE = re.compile(r"you see (.+)\.\s*$", re.MULTILINE)


def _receptacles_in(observation: str) -> list[str]:
    """Receptacle names of a real opening observation ("... you see a cabinet 1, and a fridge 1.")."""
    match = _ROOM_LINE.search(observation)
    if match is None:
        return []
    parts = re.split(r",\s*(?:and\s+)?|\s+and\s+", match.group(1))
    return [re.sub(r"^an? ", "", p.strip()) for p in parts if p.strip()]


_INSTRUCTIONS = """\
You simulate ALFWorld, a text game set in a household room (a kitchen, bathroom, bedroom or living \
room from the ALFRED scenes). The agent must complete one household task by typing commands. You \
receive a command and answer with the text the game prints next, exactly in ALFWorld's style.

How the world behaves
- The room holds numbered receptacles (cabinet 1, countertop 2, fridge 1...) and numbered objects on or \
in them (apple 1, mug 2, spraybottle 1...). Decide the hidden layout plausibly for the room and the task \
(objects where people keep them: a mug in a cabinet or on the countertop, soap near the sink) and keep \
it consistent for the whole episode: never move, rename or invent objects the history contradicts.
- The agent holds at most one object. "go to X" moves to a receptacle and describes it: "On the \
countertop 1, you see a apple 1, and a knife 2." or "You arrive at fridge 1. The fridge 1 is closed." \
(closed cabinets, drawers, fridges, microwaves and safes hide their contents until opened).
- "open X" / "close X": "You open the fridge 1. The fridge 1 is open. In it, you see a egg 1, and a \
lettuce 1." / "You close the fridge 1." "take X from Y": "You pick up the apple 1 from the countertop \
1." "put X in/on Y": "You put the apple 1 in/on the fridge 1." The agent must be at the receptacle.
- "clean X with sinkbasin N": "You clean the mug 1 using the sinkbasin 1." "heat X with microwave N": \
"You heat the egg 1 using the microwave 1." "cool X with fridge N": "You cool the potato 1 using the \
fridge 1." The object must be held and the agent at the appliance.
- "use desklamp N" (or floorlamp): "You turn on the desklamp 1." "examine X" describes it; "look": "You \
are facing the X. Next to it, you see nothing."; "inventory": "You are carrying: a apple 1." or "You \
are not carrying anything."

State format: the game's text only, no markup. The first state is:
You are in the middle of a room. Looking quickly around you, you see a cabinet 2, a cabinet 1, a \
countertop 1, a fridge 1, a microwave 1, and a sinkbasin 1.
Your task is to: put a clean mug in coffeemachine.

Invalid or ineffective actions
A command that is malformed, names something absent or out of reach, or is impossible now (taking \
while holding something, putting what is not held, opening what is open) changes nothing; the next \
state is exactly "Nothing happens." with done=false, success=false.

Ending and success
The goal holds when the task's condition is true in the world: pick_and_place (the object is in/on the \
target receptacle), clean/heat/cool then place (the object was cleaned/heated/cooled with the right \
appliance and then put in/on the target), pick_two (two objects of the kind are in/on the target), \
look_at_obj_in_light (the agent holds the object and has turned on a lamp). On the step that makes it \
true, done=true and success=true. Otherwise done=false (the step limit is handled by the environment).

admissible_actions: every command valid in the new state, in ALFWorld's templates: "go to R" for each \
receptacle, "open R"/"close R" for closable receptacles at hand, "take O from R" for each visible object \
when nothing is held, "put O in/on R" when holding O, "clean/heat/cool O with R" at the matching \
appliance, "use L" for a lamp at hand, "examine O/R", "look", "inventory"."""


class ALFWorldDomain(Domain):
    """ALFWorld as an abstract text world (Shridhar et al., 2021).

    State format: the game's own text. The first state lists the room's receptacles and the goal::

        You are in the middle of a room. Looking quickly around you, you see a cabinet 2, a cabinet 1,
        a countertop 1, a fridge 1, a microwave 1, and a sinkbasin 1.
        Your task is to: heat some egg and put it in countertop.

    Later states are one or two sentences (``"You pick up the egg 1 from the fridge 1."``); an
    invalid command is answered ``"Nothing happens."``.

    Starting state: when the task's metadata has ``initial_observation`` (tasks loaded from the ReAct
    file), that real room is used. Otherwise a room is generated with ``rng``: a room kind that fits the
    task (``metadata["scene"]`` if given; heating and cooling need a kitchen, cleaning a kitchen or
    bathroom, looking under a lamp a bedroom or living room) and receptacle counts drawn from
    :data:`ROOM_RECEPTACLES`, always including the target receptacle and the tool the task needs.
    ``admissible_actions`` then holds ``go to`` each receptacle, ``inventory`` and ``look``.

    Actions: ALFWorld's command templates (see :attr:`action_help`).

    Episode end: when the task's goal condition holds (success) or at the step limit.

    Tasks: :meth:`seed_tasks` (12 tasks, two per task type) and :meth:`load_tasks` for the ReAct prompt
    file or ALFRED ``traj_data.json`` files.
    """

    name = "alfworld"
    env_id = "DreamGym/ALFWorld-v0"
    max_steps = BUILTIN_DOMAINS[name].max_steps  # the one definition: the domain table
    task_fact_keys = ("task_type", "object", "receptacle", "lamp")
    instructions = _INSTRUCTIONS
    action_help = (
        "ALFWorld commands (objects and receptacles are named with their number, e.g. 'apple 1'): "
        "go to <recep>, open <recep>, close <recep>, take <obj> from <recep>, put <obj> in/on <recep>, "
        "clean <obj> with <recep>, heat <obj> with <recep>, cool <obj> with <recep>, "
        "slice <obj> with <obj>, toggle <obj>, use <obj>, examine <obj or recep>, look, inventory. "
        "Example: take mug 1 from cabinet 3."
    )
    _NAME = r"[a-z][a-z]* \d+"
    action_patterns = (
        rf"go to {_NAME}",
        rf"(?:open|close|toggle|use|examine) {_NAME}",
        rf"take {_NAME} from {_NAME}",
        rf"put {_NAME} (?:in/on|in|on) {_NAME}",
        rf"move {_NAME} to {_NAME}",
        rf"(?:clean|heat|cool|slice) {_NAME} with {_NAME}",
        r"look",
        r"inventory",
    )

    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        """The opening room: the real one from ``initial_observation``, else one drawn with ``rng``."""
        observation = task.metadata.get("initial_observation")
        if isinstance(observation, str) and observation.strip():
            text = observation.strip()
            if "Your task is to:" not in text:
                text = f"{text}\nYour task is to: {task.instruction}"
            receptacles = _receptacles_in(text)
        else:
            receptacles = _listing_order(self._draw_room(task, rng))
            text = _render_room(receptacles, task.instruction)
        actions = [f"go to {r}" for r in receptacles] + ["inventory", "look"]
        return InitialState(state=text, admissible_actions=actions)

    def _draw_room(self, task: Task, rng: np.random.Generator) -> dict[str, int]:
        """Receptacle counts of a room that can host the task."""
        meta = task.metadata
        needed = [r for r in (meta.get("receptacle"), ALFWORLD_TOOLS.get(str(meta.get("task_type")))) if r]
        scene = meta.get("scene")
        if scene not in ROOM_RECEPTACLES:
            fitting = [
                kind
                for kind, recs in ROOM_RECEPTACLES.items()
                if all(recs.get(r, (0, 0))[1] > 0 for r in needed)
                and (meta.get("task_type") != "look_at_obj_in_light" or any(s in recs for s in LAMP_STANDS))
            ]
            kinds = fitting or ["kitchen"]
            scene = kinds[int(rng.integers(len(kinds)))]
        counts = {kind: int(rng.integers(lo, hi + 1)) for kind, (lo, hi) in ROOM_RECEPTACLES[scene].items()}
        for r in needed:
            counts[r] = max(counts.get(r, 0), 1)
        if meta.get("task_type") == "look_at_obj_in_light" and not any(counts.get(s) for s in LAMP_STANDS):
            counts["sidetable"] = 1
        return {kind: n for kind, n in counts.items() if n > 0}

    def seed_tasks(self) -> list[Task]:
        """Two tasks for each of the six task types, one in each of ALFWorld's phrasings."""
        return [
            make_alfworld_task(task_type, obj, target, variant=variant)
            if task_type != "look_at_obj_in_light"
            else make_alfworld_task(task_type, obj, lamp=target, variant=variant)
            for task_type, obj, target, variant in _SEED_SPECS
        ]

    @classmethod
    def load_tasks(cls, path: str | os.PathLike[str]) -> list[Task]:
        """Load tasks from the ReAct prompt file, a ``traj_data.json`` file, or a folder of those files.

        Raises:
            DataFormatError: The path is none of these, or its content does not match the format.
        """
        p = Path(path)
        if p.is_dir() or p.name == "traj_data.json":
            return load_alfworld_traj_data(p)
        if p.suffix == ".json":
            return load_alfworld_react_tasks(p)
        raise DataFormatError(
            "expected ALFWorld's ReAct prompt file (*.json), a traj_data.json, or a folder of traj_data.json "
            "files",
            path=str(p),
        )


_SEED_SPECS: tuple[tuple[str, str, str, int], ...] = (
    ("pick_and_place_simple", "soapbar", "cabinet", 0),
    ("pick_and_place_simple", "keychain", "safe", 1),
    ("pick_clean_then_place_in_recep", "mug", "coffeemachine", 0),
    ("pick_clean_then_place_in_recep", "cloth", "bathtubbasin", 1),
    ("pick_heat_then_place_in_recep", "potato", "diningtable", 0),
    ("pick_heat_then_place_in_recep", "cup", "cabinet", 1),
    ("pick_cool_then_place_in_recep", "winebottle", "countertop", 0),
    ("pick_cool_then_place_in_recep", "tomato", "microwave", 1),
    ("look_at_obj_in_light", "book", "desklamp", 0),
    ("look_at_obj_in_light", "alarmclock", "desklamp", 1),
    ("pick_two_obj_and_place", "pillow", "sofa", 0),
    ("pick_two_obj_and_place", "remotecontrol", "armchair", 1),
)
"""(task type, object, receptacle or lamp, phrasing) of the seed tasks."""
