"""WebShop's task files: human goals, item instructions, goal queries and human session logs.

Formats read: ``human_goals.json`` (a JSON list of instruction strings), ``items_ins_v2*.json`` (ASIN ->
``{"attributes", "instruction", "instruction_attributes"}``), ``goal_query_map.json`` (instruction ->
list of search queries) and human session logs (``*.jsonl``, one visited page per line, each with the
session's ``goal`` dict), a single log or a folder of them. Reached from
:meth:`dreamgym_env.domains.webshop.WebShopDomain.load_tasks`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dreamgym_env.domains.task_files import read_json, read_jsonl, require
from dreamgym_env.errors import DataFormatError
from dreamgym_env.records import Task

OPTIONS_KEY = "options"
"""Task metadata key of the options a goal requires (WebShop's own goal records call it ``goal_options``)."""


def webshop_task_id(session: str | int, goal_index: int = 0) -> str:
    """The task id of a WebShop session: ``webshop-session-<session>``.

    ``session`` is a session name (a human session log's file stem, ``20220427_1_12``) or the goal index
    the real store is reset with. ``goal_index`` numbers the further goals of a log that holds several
    (``-1``, ``-2``...); the first goal has no suffix.
    """
    return f"webshop-session-{session}" + (f"-{goal_index}" if goal_index else "")


def session_goal_metadata(goal: Mapping[str, Any]) -> dict[str, Any]:
    """Task metadata of a goal as WebShop records it (a session log's ``goal`` object).

    Holds the hidden facts under :data:`GOAL_FACT_KEYS` (``goal_options`` becomes :data:`OPTIONS_KEY`)
    and what else the record names: ``asin``, ``query``, ``product_category``, ``product_name``.
    """
    price = goal.get("price_upper")
    return {
        "asin": goal.get("asin"),
        "attributes": list(goal.get("attributes") or []),
        OPTIONS_KEY: list(goal.get("goal_options") or []),
        "price_upper": float(price) if isinstance(price, int | float) else price,
        "category": goal.get("category"),
        "query": goal.get("query"),
        "product_category": goal.get("product_category"),
        "product_name": goal.get("name"),
    }


PathLike = str | os.PathLike[str]

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
    data = read_json(p)
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


def _instruction_task(task_id: str, text: str, metadata: dict[str, Any], source: str) -> Task:
    """A task of a bare instruction string; the price cap it states joins ``metadata`` as ``price_upper``.

    Goal lists and query maps carry no goal record, so the text is the only place the cap is stated.
    """
    price = parse_price_upper(text)
    if price is not None:
        metadata["price_upper"] = price
    return Task(task_id=task_id, domain="webshop", instruction=text.strip(), metadata=metadata, source=source)


def _webshop_goal_list(data: list[Any], path: Path) -> list[Task]:
    tasks = []
    for i, text in enumerate(data):
        if not isinstance(text, str) or not text.strip():
            raise DataFormatError(
                f"item {i}: expected a non-empty instruction string, got {text!r:.60}", path=str(path)
            )
        tasks.append(_instruction_task(f"webshop-human-{i}", text, {"goal_index": i}, "webshop:human_goals"))
    return tasks


def _webshop_items(data: dict[str, Any], path: Path) -> list[Task]:
    tasks = []
    for asin, record in data.items():
        where = f"item {asin!r}"
        if not isinstance(record, Mapping):
            raise DataFormatError(f"{where}: expected an object, got {type(record).__name__}", path=str(path))
        if "instruction" not in record:
            continue  # items the WebShop authors did not write an instruction for
        text = require(record, "instruction", str, path, where)
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
        tasks.append(
            _instruction_task(
                f"webshop-query-{i}", text, {"queries": list(queries)}, "webshop:goal_query_map"
            )
        )
    return tasks


def _webshop_session_tasks(path: Path) -> list[Task]:
    seen: dict[str, Task] = {}
    for lineno, record in read_jsonl(path):
        goal = require(record, "goal", dict, path, "page record", lineno)
        text = require(goal, "instruction_text", str, path, "goal", lineno)
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
