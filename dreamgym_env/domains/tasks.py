"""Task loaders for the official benchmark files, and ALFWorld's goal templates.

The package does not ship the benchmarks' data; users point these loaders at their own copies. Every
loader returns :class:`~dreamgym_env.types.Task` objects whose ``metadata`` keeps what the experience
model needs to judge success (goal attributes, goal conditions, evaluation references), and raises
:class:`~dreamgym_env.errors.DataFormatError` naming the file and the line or item that is wrong.

Formats read:

* WebShop: ``human_goals.json`` (a JSON list of instruction strings), ``items_ins_v2*.json`` (ASIN ->
  ``{"attributes", "instruction", "instruction_attributes"}``), ``goal_query_map.json`` (instruction ->
  list of search queries) and human session logs (``*.jsonl``, one visited page per line, each with the
  session's ``goal`` dict), a single log or a folder of them.
* WebArena: ``test.raw.json`` (a list of task configs) or a single config (``config_files/<id>.json``),
  or a folder of single configs.
* ALFWorld: the ReAct prompt file (``react_alfworld_3prompts.json``: name -> trajectory text) and ALFRED
  ``traj_data.json`` files (one file, or a folder searched recursively as in ALFWorld's ``json_2.1.1``).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dreamgym_env.domains.webshop import session_goal_metadata, webshop_task_id
from dreamgym_env.errors import DataFormatError
from dreamgym_env.types import Task

__all__ = [
    "ALFWORLD_GOAL_TEMPLATES",
    "ALFWORLD_TASK_TYPES",
    "alfworld_tasks_from_templates",
    "load_alfworld_react_tasks",
    "load_alfworld_traj_data",
    "load_webarena_tasks",
    "load_webshop_goals",
    "make_alfworld_task",
    "parse_alfworld_goal",
    "parse_price_upper",
]

PathLike = str | os.PathLike[str]

# --------------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    """Parse a JSON file, turning every failure into a DataFormatError that points at the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise DataFormatError("file not found; check the path", path=str(path)) from e
    except OSError as e:
        raise DataFormatError(f"cannot read file: {e}", path=str(path)) from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"invalid JSON: {e.msg}", path=str(path), line=e.lineno) from e


def _read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for each non-blank line of a JSON-lines file."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as e:
        raise DataFormatError(f"cannot read file: {e}", path=str(path)) from e
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield lineno, json.loads(raw)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"invalid JSON line: {e.msg}", path=str(path), line=lineno) from e


def _require(
    record: Any, key: str, kind: type | tuple[type, ...], path: Path, where: str, line: int | None = None
) -> Any:
    """Return ``record[key]`` after checking it exists and has the expected type."""
    if not isinstance(record, Mapping):
        raise DataFormatError(
            f"{where}: expected a JSON object, got {type(record).__name__}", str(path), line
        )
    if key not in record:
        raise DataFormatError(f"{where}: missing required key {key!r}", str(path), line)
    value = record[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int subclass; a JSON true where a number belongs is still a format error.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise DataFormatError(
            f"{where}: key {key!r} must be {names}, got {type(value).__name__}", str(path), line
        )
    return value


# --------------------------------------------------------------------------------------------------
# WebShop
# --------------------------------------------------------------------------------------------------

_PRICE_RE = re.compile(r"price (?:lower|less) than\s*\$?\s*([0-9]+(?:\.[0-9]+)?)\s*dollars", re.IGNORECASE)


def parse_price_upper(instruction: str) -> float | None:
    """Return the price limit stated in a WebShop instruction ("price lower than 40.00 dollars")."""
    match = _PRICE_RE.search(instruction)
    return float(match.group(1)) if match else None


def load_webshop_goals(path: PathLike) -> list[Task]:
    """Load WebShop goals from any of the official files, detected by content.

    Args:
        path: One of: ``human_goals.json`` (list of instruction strings; metadata gets ``price_upper``
            when the text states one); ``items_ins_v2*.json`` (ASIN -> record; entries without an
            ``instruction`` are skipped; metadata gets ``asin``, ``attributes`` = the instruction's
            attributes and ``product_attributes``); ``goal_query_map.json`` (instruction -> queries;
            metadata gets ``queries``); a human session log ``*.jsonl`` or a folder of them (one task
            per distinct goal; metadata gets ``asin``, ``attributes``, ``options``, ``price_upper``,
            ``category``, ``query``, ``product_category``, ``product_name``).

    Returns:
        Tasks in file order, with stable ids (``webshop-human-<i>``, ``webshop-asin-<ASIN>``,
        ``webshop-query-<i>``, ``webshop-session-<name>``).

    Raises:
        DataFormatError: The file is missing, is not JSON, or a record does not match the format.
    """
    p = Path(path)
    if p.is_dir():
        logs = sorted(p.glob("*.jsonl"))
        if not logs:
            raise DataFormatError("folder holds no WebShop session logs (*.jsonl)", path=str(p))
        return [t for log in logs for t in _webshop_session_tasks(log)]
    if p.suffix == ".jsonl":
        return _webshop_session_tasks(p)
    data = _read_json(p)
    if isinstance(data, list):
        return _webshop_goal_list(data, p)
    if isinstance(data, dict):
        first = next(iter(data.values()), None)
        if isinstance(first, list):
            return _webshop_query_map(data, p)
        return _webshop_items(data, p)
    raise DataFormatError(
        "expected a list of instructions (human_goals.json), an ASIN -> item map (items_ins_v2*.json) or "
        f"an instruction -> queries map (goal_query_map.json), got {type(data).__name__}",
        path=str(p),
    )


def _webshop_goal_list(data: list[Any], path: Path) -> list[Task]:
    tasks = []
    for i, text in enumerate(data):
        if not isinstance(text, str) or not text.strip():
            raise DataFormatError(
                f"item {i}: expected a non-empty instruction string, got {text!r:.60}", path=str(path)
            )
        metadata: dict[str, Any] = {"goal_index": i}
        price = parse_price_upper(text)
        if price is not None:
            metadata["price_upper"] = price
        tasks.append(
            Task(
                task_id=f"webshop-human-{i}",
                domain="webshop",
                instruction=text.strip(),
                metadata=metadata,
                source="webshop:human_goals",
            )
        )
    return tasks


def _webshop_items(data: dict[str, Any], path: Path) -> list[Task]:
    tasks = []
    for asin, record in data.items():
        where = f"item {asin!r}"
        if not isinstance(record, Mapping):
            raise DataFormatError(f"{where}: expected an object, got {type(record).__name__}", path=str(path))
        if "instruction" not in record:
            continue  # items the WebShop authors did not write an instruction for
        text = _require(record, "instruction", str, path, where)
        goal_attrs = record.get("instruction_attributes", [])
        product_attrs = record.get("attributes", [])
        for key, value in (("instruction_attributes", goal_attrs), ("attributes", product_attrs)):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise DataFormatError(f"{where}: {key!r} must be a list of strings", path=str(path))
        tasks.append(
            Task(
                task_id=f"webshop-asin-{asin}",
                domain="webshop",
                instruction=text.strip(),
                metadata={
                    "asin": asin,
                    "attributes": list(goal_attrs),
                    "product_attributes": list(product_attrs),
                },
                source="webshop:items_ins",
            )
        )
    return tasks


def _webshop_query_map(data: dict[str, Any], path: Path) -> list[Task]:
    tasks = []
    for i, (text, queries) in enumerate(data.items()):
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise DataFormatError(
                f"item {i} ({text!r:.60}): queries must be a list of strings", path=str(path)
            )
        metadata: dict[str, Any] = {"queries": list(queries)}
        price = parse_price_upper(text)
        if price is not None:
            metadata["price_upper"] = price
        tasks.append(
            Task(
                task_id=f"webshop-query-{i}",
                domain="webshop",
                instruction=text.strip(),
                metadata=metadata,
                source="webshop:goal_query_map",
            )
        )
    return tasks


def _webshop_session_tasks(path: Path) -> list[Task]:
    seen: dict[str, Task] = {}
    for lineno, record in _read_jsonl(path):
        goal = _require(record, "goal", dict, path, "page record", lineno)
        text = _require(goal, "instruction_text", str, path, "goal", lineno)
        key = json.dumps(goal, sort_keys=True)
        if key in seen:
            continue
        price = goal.get("price_upper")
        if price is not None and not isinstance(price, int | float):
            raise DataFormatError("goal: 'price_upper' must be a number", str(path), lineno)
        seen[key] = Task(
            task_id=webshop_task_id(path.stem, len(seen)),
            domain="webshop",
            instruction=text.strip(),
            metadata=session_goal_metadata(goal),
            source="webshop:session_log",
        )
    if not seen:
        raise DataFormatError("session log holds no page records", path=str(path))
    return list(seen.values())


# --------------------------------------------------------------------------------------------------
# WebArena
# --------------------------------------------------------------------------------------------------

_WEBARENA_METADATA_KEYS = (
    "sites",
    "start_url",
    "eval",
    "intent_template",
    "intent_template_id",
    "instantiation_dict",
    "require_login",
    "storage_state",
    "geolocation",
    "require_reset",
)


def load_webarena_tasks(path: PathLike) -> list[Task]:
    """Load WebArena tasks from ``test.raw.json``, one ``config_files/<id>.json`` or a folder of them.

    ``start_url`` keeps WebArena's site placeholders (``__SHOPPING__``, ``__GITLAB__``...; several
    start pages are joined by `` |AND| ``); :class:`~dreamgym_env.domains.webarena.WebArenaDomain`
    resolves them to URLs when it renders the first page.

    Returns:
        One task per config, id ``webarena-<task_id>``, ``instruction`` = ``intent`` and metadata holding
        ``sites``, ``start_url``, ``eval`` (the official evaluation spec) and the other config fields.

    Raises:
        DataFormatError: The file is not JSON, or a config lacks ``task_id``, ``intent``, ``sites`` or
            ``start_url`` or has them with the wrong type (the message names the list index).
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.json"), key=lambda f: (len(f.stem), f.stem))
        if not files:
            raise DataFormatError("folder holds no WebArena config files (*.json)", path=str(p))
        return [t for f in files for t in load_webarena_tasks(f)]
    data = _read_json(p)
    records = data if isinstance(data, list) else [data]
    tasks = []
    for i, record in enumerate(records):
        where = f"item {i}" if isinstance(data, list) else "config"
        task_id = _require(record, "task_id", (int, str), p, where)
        intent = _require(record, "intent", str, p, where)
        sites = _require(record, "sites", list, p, where)
        if not sites or not all(isinstance(s, str) for s in sites):
            raise DataFormatError(f"{where}: 'sites' must be a non-empty list of site names", path=str(p))
        _require(record, "start_url", str, p, where)
        metadata = {key: record[key] for key in _WEBARENA_METADATA_KEYS if key in record}
        tasks.append(
            Task(
                task_id=f"webarena-{task_id}",
                domain="webarena",
                instruction=intent.strip(),
                metadata=metadata,
                source="webarena",
            )
        )
    return tasks


# --------------------------------------------------------------------------------------------------
# ALFWorld
# --------------------------------------------------------------------------------------------------

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
    from dreamgym_env.errors import DomainError

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
    data = _read_json(p)
    if not isinstance(data, dict):
        raise DataFormatError(
            f"expected a JSON object name -> trajectory text, got {type(data).__name__}", str(p)
        )
    tasks = []
    for name, text in data.items():
        if not isinstance(text, str):
            raise DataFormatError(f"item {name!r}: trajectory must be a string", path=str(p))
        match = _TASK_LINE.search(text)
        if match is None:
            raise DataFormatError(f"item {name!r}: no 'Your task is to: ...' line", path=str(p))
        instruction = match.group(1).strip()
        parsed = parse_alfworld_goal(instruction) or {}
        key_type = _REACT_KEY_TYPES.get(name.split("_")[1]) if name.count("_") >= 2 else None
        task_type = key_type or parsed.get("task_type")
        if task_type is None:
            raise DataFormatError(f"item {name!r}: cannot tell the task type of {instruction!r}", path=str(p))
        metadata: dict[str, Any] = {**parsed, "task_type": task_type}
        metadata["initial_observation"] = text[: match.start()].strip()
        tasks.append(
            Task(
                task_id=f"alfworld-react-{name}",
                domain="alfworld",
                instruction=instruction,
                metadata=metadata,
                source="alfworld:react_prompts",
            )
        )
    return tasks


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
    data = _read_json(path)
    task_type = _require(data, "task_type", str, path, "trajectory")
    if task_type == _ALFRED_MOVABLE_RECEP:
        raise _UnplayedTaskType(
            f"task type {task_type!r} is not one of ALFWorld's six: {list(ALFWORLD_TASK_TYPES)}"
        )
    if task_type not in ALFWORLD_TASK_TYPES:
        raise DataFormatError(
            f"unknown task_type {task_type!r}; expected one of {list(ALFWORLD_TASK_TYPES)}", path=str(path)
        )
    params = _require(data, "pddl_params", dict, path, "trajectory")
    obj = _require(params, "object_target", str, path, "pddl_params").lower()
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
        task_type, obj, recep or None, lamp=lamp or "desklamp", scene=scene, task_id=f"alfworld-{trial}"
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
            task_id=f"alfworld-{trial}-ann{i}",
            domain="alfworld",
            instruction=desc,
            metadata=metadata,
            source="alfworld:traj_data",
        )
        for i, desc in enumerate(descs)
    ]
