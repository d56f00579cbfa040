"""ALFWorld's tasks: the six task types, their goal phrasings and parser, and the task files.

Files read: the ReAct prompt file (``react_alfworld_3prompts.json``: name -> trajectory text) and
ALFRED ``traj_data.json`` files (one file, or a folder searched recursively as in ALFWorld's
``json_2.1.1``). Reached from :meth:`dreamgym_env.domains.alfworld.ALFWorldDomain.load_tasks`.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dreamgym_env.domains.task_files import read_json, require
from dreamgym_env.errors import DataFormatError, DomainError
from dreamgym_env.records import Task

PathLike = str | os.PathLike[str]

ALFWORLD_TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "look_at_obj_in_light",
    "pick_two_obj_and_place",
)
"""The six ALFRED task types ALFWorld plays (ALFRED's seventh, movable receptacles, is not played)."""

ALFWORLD_GOAL_TEMPLATES: dict[str, tuple[str, ...]] = {
    "pick_and_place_simple": ("put a {obj} in {recep}.", "put some {obj} on {recep}."),
    "pick_clean_then_place_in_recep": (
        "put a clean {obj} in {recep}.",
        "clean some {obj} and put it in {recep}.",
    ),
    "pick_heat_then_place_in_recep": (
        "put a hot {obj} in {recep}.",
        "heat some {obj} and put it in {recep}.",
    ),
    "pick_cool_then_place_in_recep": (
        "put a cool {obj} in {recep}.",
        "cool some {obj} and put it in {recep}.",
    ),
    "look_at_obj_in_light": ("look at {obj} under the {lamp}.", "examine the {obj} with the {lamp}."),
    "pick_two_obj_and_place": ("put two {obj} in {recep}.", "find two {obj} and put them in {recep}."),
}
"""Goal phrasings per task type, as ALFWorld's text games word them (``{obj}``, ``{recep}``, ``{lamp}``)."""

# Tools a task type needs in the room: the appliance that changes the object's state.
ALFWORLD_TOOLS: dict[str, str] = {
    "pick_clean_then_place_in_recep": "sinkbasin",
    "pick_heat_then_place_in_recep": "microwave",
    "pick_cool_then_place_in_recep": "fridge",
}

_ARTICLE = r"(?:a |an |some |the )?"


def _placing(adjective: str, verb: str) -> re.Pattern[str]:
    """'put a hot egg in X' / 'heat some egg and put it in X'."""
    return re.compile(
        rf"(?:put a {adjective} (?P<obj>\w+)|{verb} {_ARTICLE}(?P<obj2>\w+) and put it)"
        r" (?:in|on) (?P<recep>\w+)"
    )


_GOAL_PARSERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "pick_two_obj_and_place",
        re.compile(r"(?:put|find) two (?P<obj>\w+) (?:and put them )?(?:in|on) (?P<recep>\w+)"),
    ),
    (
        "look_at_obj_in_light",
        re.compile(rf"(?:look at|examine) {_ARTICLE}(?P<obj>\w+) (?:under|with) the (?P<lamp>\w+)"),
    ),
    ("pick_clean_then_place_in_recep", _placing("clean", "clean")),
    ("pick_heat_then_place_in_recep", _placing("hot", "heat")),
    ("pick_cool_then_place_in_recep", _placing("cool", "cool")),
    (
        "pick_and_place_simple",
        re.compile(
            rf"(?:put {_ARTICLE}(?P<obj>\w+)|find {_ARTICLE}(?P<obj2>\w+) and put it)"
            r" (?:in|on) (?P<recep>\w+)"
        ),
    ),
)


def parse_alfworld_goal(text: str) -> dict[str, str] | None:
    """Read the task type and its arguments from an ALFWorld goal sentence.

    Returns:
        ``{"task_type", "object", "receptacle"}`` (``"lamp"`` instead of ``"receptacle"`` for
        ``look_at_obj_in_light``), or ``None`` when the sentence is in none of the known phrasings.
    """
    goal = text.strip().lower().removeprefix("your task is to:").strip()
    for task_type, pattern in _GOAL_PARSERS:
        match = pattern.match(goal)
        if match:
            groups = match.groupdict()
            parsed = {"task_type": task_type, "object": groups.get("obj") or groups.get("obj2") or ""}
            if "lamp" in groups:
                parsed["lamp"] = groups["lamp"]
            else:
                parsed["receptacle"] = groups["recep"]
            return parsed
    return None


def make_alfworld_task(
    task_type: str,
    obj: str,
    recep: str | None = None,
    *,
    lamp: str = "desklamp",
    variant: int = 0,
    task_id: str | None = None,
    scene: str | None = None,
) -> Task:
    """Build an ALFWorld task from its type and arguments, worded with :data:`ALFWORLD_GOAL_TEMPLATES`.

    Args:
        task_type: One of :data:`ALFWORLD_TASK_TYPES`.
        obj: Object type, lowercase ALFRED name (``"apple"``, ``"spraybottle"``).
        recep: Target receptacle type (``"countertop"``); unused for ``look_at_obj_in_light``.
        lamp: The light source for ``look_at_obj_in_light`` (``"desklamp"`` or ``"floorlamp"``).
        variant: Which phrasing of the task type to use (0 or 1).
        task_id: Id to give; default ``alfworld-<type>-<obj>-<recep>-<variant>``.
        scene: Room kind to build (``"kitchen"``, ``"bathroom"``, ``"bedroom"``, ``"livingroom"``);
            default: chosen at reset among the rooms that fit the task.

    Raises:
        DomainError: Unknown task type, or a missing receptacle for a placing task.
    """
    if task_type not in ALFWORLD_GOAL_TEMPLATES:
        raise DomainError(
            f"Unknown ALFWorld task type {task_type!r}; expected one of {list(ALFWORLD_TASK_TYPES)}"
        )
    looking = task_type == "look_at_obj_in_light"
    if not looking and not recep:
        raise DomainError(f"ALFWorld task type {task_type!r} needs a target receptacle (recep=...)")
    templates = ALFWORLD_GOAL_TEMPLATES[task_type]
    text = templates[variant % len(templates)].format(obj=obj, recep=recep, lamp=lamp)
    metadata: dict[str, Any] = {"task_type": task_type, "object": obj}
    metadata.update({"lamp": lamp} if looking else {"receptacle": recep})
    if scene is not None:
        metadata["scene"] = scene
    target = lamp if looking else recep
    return Task(
        task_id=task_id or f"alfworld-{task_type}-{obj}-{target}-{variant}",
        domain="alfworld",
        instruction=text,
        metadata=metadata,
        source="seed",
    )


def alfworld_tasks_from_templates(
    specs: Mapping[str, list[tuple[str, str]]], *, variants: tuple[int, ...] = (0, 1)
) -> list[Task]:
    """Make tasks for each task type from ``{task_type: [(object, receptacle_or_lamp), ...]}``.

    Every phrasing in ``variants`` is produced for each pair, so one call covers all six types with both
    wordings an agent meets in ALFWorld.
    """
    tasks = []
    for task_type, pairs in specs.items():
        for obj, target in pairs:
            for variant in variants:
                if task_type == "look_at_obj_in_light":
                    tasks.append(make_alfworld_task(task_type, obj, lamp=target, variant=variant))
                else:
                    tasks.append(make_alfworld_task(task_type, obj, target, variant=variant))
    return tasks


_REACT_KEY_TYPES = {
    "put": "pick_and_place_simple",
    "clean": "pick_clean_then_place_in_recep",
    "heat": "pick_heat_then_place_in_recep",
    "cool": "pick_cool_then_place_in_recep",
    "examine": "look_at_obj_in_light",
    "puttwo": "pick_two_obj_and_place",
}
_TASK_LINE = re.compile(r"^Your task is to: (.+)$", re.MULTILINE)


def load_alfworld_react_tasks(path: PathLike) -> list[Task]:
    """Load the tasks of the ReAct ALFWorld prompt file (``react_alfworld_3prompts.json``).

    The file maps a name (``react_put_0``, ``act_heat_2``...) to a whole trajectory as the agent saw it.
    Each yields one task: the ``Your task is to: ...`` line as instruction; metadata holds
    ``task_type`` (from the name, else from the sentence), ``object``, ``receptacle`` or ``lamp``, and
    ``initial_observation``, the real first room description, which the ALFWorld domain then uses as
    the first state. ``react_*`` and ``act_*`` entries are the same games, so their tasks repeat.

    Raises:
        DataFormatError: Not a JSON object of strings, or a trajectory without a task line.
    """
    p = Path(path)
    data = read_json(p)
    if not isinstance(data, dict):
        raise DataFormatError(
            f"expected a JSON object name -> trajectory text, got {type(data).__name__}", str(p)
        )
    tasks = []
    for name, text in data.items():
        if not isinstance(text, str):
            raise DataFormatError(f"item {name!r}: trajectory must be a string", path=str(p))
        try:
            task = alfworld_react_task(name, text)
        except ValueError as e:
            raise DataFormatError(f"item {name!r}: {e}", path=str(p)) from None
        if "task_type" not in task.metadata:
            raise DataFormatError(
                f"item {name!r}: cannot tell the task type of {task.instruction!r}", path=str(p)
            )
        tasks.append(task)
    return tasks


def _alfworld_react_task_id(name: str) -> str:
    """The task id of a ReAct prompt file's entry ``name``: ``alfworld-react-<name>``."""
    return f"alfworld-react-{name}"


def alfworld_react_game_id(name: str) -> str | None:
    """The game a ReAct prompt file's entry ``name`` plays, or ``None`` for a name that does not say.

    The file plays each game twice, by an acting agent (``act_put_0``) and a reasoning one
    (``react_put_0``): one room, one goal, one task sentence. Both get ``alfworld-react-put_0``, so a
    split by game keeps the two on one side (:data:`dreamgym_env.records.GAME_ID`).
    """
    style, _, rest = name.partition("_")
    return _alfworld_react_task_id(rest) if style in ("act", "react") and rest else None


def alfworld_react_task(name: str, text: str) -> Task:
    """The task of one ReAct trajectory (``name`` -> ``text``), as the task loader and the buffer import see it.

    The instruction is the ``Your task is to: ...`` line; metadata holds ``task_type`` (from the name,
    else from the sentence; left out when neither tells), ``object``, ``receptacle`` or ``lamp``, and
    ``initial_observation``, the text before the task line.

    Raises:
        ValueError: The text has no task line.
    """
    match = _TASK_LINE.search(text)
    if match is None:
        raise ValueError("no 'Your task is to: ...' line")
    instruction = match.group(1).strip()
    parsed = parse_alfworld_goal(instruction) or {}
    key_type = _REACT_KEY_TYPES.get(name.split("_")[1]) if name.count("_") >= 2 else None
    metadata: dict[str, Any] = dict(parsed)
    task_type = key_type or parsed.get("task_type")
    if task_type is not None:
        metadata["task_type"] = task_type
    metadata["initial_observation"] = text[: match.start()].strip()
    return Task(
        task_id=_alfworld_react_task_id(name),
        domain="alfworld",
        instruction=instruction,
        metadata=metadata,
        source="alfworld:react_prompts",
    )


def alfworld_trial_task_id(trial: str) -> str:
    """The task id of an ALFRED trial (``trial_T2019...``, its folder's name): ``alfworld-<trial>``.

    The ``traj_data.json`` loader and the real wrapper (from the game file's folder) both use it.
    """
    return f"alfworld-{trial}"


# ALFRED scene numbers: FloorPlan1-30 kitchens, 201-230 living rooms, 301-330 bedrooms, 401-430 bathrooms.
_SCENE_KINDS = ((0, "kitchen"), (200, "livingroom"), (300, "bedroom"), (400, "bathroom"))
_ALFRED_MOVABLE_RECEP = "pick_and_place_with_movable_recep"


def load_alfworld_traj_data(path: PathLike, *, human_annotations: bool = False) -> list[Task]:
    """Load ALFWorld tasks from ALFRED ``traj_data.json`` files.

    The fields read (ALFRED's ``json_2.1.1`` format)::

        {"task_id": "trial_T2019...",
         "task_type": "pick_heat_then_place_in_recep",
         "pddl_params": {"object_target": "Apple", "parent_target": "Fridge",
                         "toggle_target": "", "mrecep_target": "", "object_sliced": false},
         "scene": {"scene_num": 12, ...},
         "turk_annotations": {"anns": [{"task_desc": "Put a heated apple in the fridge.", ...}]}}

    Args:
        path: A ``traj_data.json`` file, or a folder searched recursively for them.
        human_annotations: False: one task per file, worded like the ALFWorld text game
            (:data:`ALFWORLD_GOAL_TEMPLATES`), the human descriptions kept in
            ``metadata["human_descriptions"]``. True: one task per annotator's ``task_desc``.

    Raises:
        DataFormatError: A required field is missing or has the wrong type, or the task type is not one
            of ALFWorld's six (in a folder, ALFRED's unplayed ``pick_and_place_with_movable_recep``
            trials are skipped with a warning instead).
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(p.rglob("traj_data.json"))
        if not files:
            raise DataFormatError("folder holds no traj_data.json files", path=str(p))
        tasks: list[Task] = []
        skipped = 0
        for f in files:
            try:
                tasks.extend(_traj_data_tasks(f, human_annotations))
            except _UnplayedTaskType:
                skipped += 1
        if skipped:
            warnings.warn(
                f"{p}: skipped {skipped} trials of ALFRED's {_ALFRED_MOVABLE_RECEP!r} type, "
                "which ALFWorld does not play",
                stacklevel=2,
            )
        return tasks
    try:
        return _traj_data_tasks(p, human_annotations)
    except _UnplayedTaskType as e:
        raise DataFormatError(str(e), path=str(p)) from None


class _UnplayedTaskType(Exception):
    pass


def _traj_data_tasks(path: Path, human_annotations: bool) -> list[Task]:
    data = read_json(path)
    task_type = require(data, "task_type", str, path, "trajectory")
    if task_type == _ALFRED_MOVABLE_RECEP:
        raise _UnplayedTaskType(
            f"task type {task_type!r} is not one of ALFWorld's six: {list(ALFWORLD_TASK_TYPES)}"
        )
    if task_type not in ALFWORLD_TASK_TYPES:
        raise DataFormatError(
            f"unknown task_type {task_type!r}; expected one of {list(ALFWORLD_TASK_TYPES)}", path=str(path)
        )
    params = require(data, "pddl_params", dict, path, "trajectory")
    obj = require(params, "object_target", str, path, "pddl_params").lower()
    recep = str(params.get("parent_target") or "").lower()
    lamp = str(params.get("toggle_target") or "").lower()
    if (
        not obj
        or (task_type == "look_at_obj_in_light" and not lamp)
        or (task_type != "look_at_obj_in_light" and not recep)
    ):
        raise DataFormatError(
            f"pddl_params lack the object/receptacle/toggle target that {task_type!r} needs", path=str(path)
        )
    turk = data.get("turk_annotations")
    anns = turk.get("anns", []) if isinstance(turk, dict) else []
    descs = [
        a["task_desc"].strip() for a in anns if isinstance(a, dict) and isinstance(a.get("task_desc"), str)
    ]
    trial = str(data.get("task_id") or path.parent.name)
    scene = None
    scene_num = data.get("scene", {}).get("scene_num") if isinstance(data.get("scene"), dict) else None
    if isinstance(scene_num, int):
        scene = next(kind for floor, kind in reversed(_SCENE_KINDS) if scene_num > floor)
    base = make_alfworld_task(
        task_type,
        obj,
        recep or None,
        lamp=lamp or "desklamp",
        scene=scene,
        task_id=alfworld_trial_task_id(trial),
    )
    metadata = {
        **base.metadata,
        "trial": trial,
        "human_descriptions": descs,
        "object_sliced": bool(params.get("object_sliced", False)),
    }
    if not human_annotations:
        return [base.model_copy(update={"metadata": metadata, "source": "alfworld:traj_data"})]
    if not descs:
        raise DataFormatError("turk_annotations.anns holds no task_desc", path=str(path))
    return [
        Task(
            task_id=f"{alfworld_trial_task_id(trial)}-ann{i}",
            domain="alfworld",
            instruction=desc,
            metadata=metadata,
            source="alfworld:traj_data",
        )
        for i, desc in enumerate(descs)
    ]
