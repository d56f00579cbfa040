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

Each domain's loaders live next to it (:mod:`~dreamgym_env.domains.webshop_tasks`,
:mod:`~dreamgym_env.domains.webarena_tasks`, :mod:`~dreamgym_env.domains.alfworld_tasks`); this
module gathers them under one import.
"""

from __future__ import annotations

from dreamgym_env.domains.alfworld_tasks import (
    ALFWORLD_GOAL_TEMPLATES,
    ALFWORLD_TASK_TYPES,
    ALFWORLD_TOOLS,
    alfworld_tasks_from_templates,
    load_alfworld_react_tasks,
    load_alfworld_traj_data,
    make_alfworld_task,
    parse_alfworld_goal,
)
from dreamgym_env.domains.webarena_tasks import load_webarena_tasks
from dreamgym_env.domains.webshop_tasks import load_webshop_goals, parse_price_upper

__all__ = [
    "ALFWORLD_GOAL_TEMPLATES",
    "ALFWORLD_TASK_TYPES",
    "ALFWORLD_TOOLS",
    "alfworld_tasks_from_templates",
    "load_alfworld_react_tasks",
    "load_alfworld_traj_data",
    "load_webarena_tasks",
    "load_webshop_goals",
    "make_alfworld_task",
    "parse_alfworld_goal",
    "parse_price_upper",
]
