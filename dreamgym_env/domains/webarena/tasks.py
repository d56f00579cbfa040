"""WebArena's task files: ``test.raw.json`` (a list of task configs), one config or a folder of them.

Reached from :meth:`dreamgym_env.domains.webarena.WebArenaDomain.load_tasks`.
"""

from __future__ import annotations

import os
from pathlib import Path

from dreamgym_env.domains.task_files import read_json, require
from dreamgym_env.errors import DataFormatError
from dreamgym_env.records import Task

PathLike = str | os.PathLike[str]

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
    data = read_json(p)
    records = data if isinstance(data, list) else [data]
    tasks = []
    for i, record in enumerate(records):
        where = f"item {i}" if isinstance(data, list) else "config"
        task_id = require(record, "task_id", (int, str), p, where)
        intent = require(record, "intent", str, p, where)
        sites = require(record, "sites", list, p, where)
        if not sites or not all(isinstance(s, str) for s in sites):
            raise DataFormatError(f"{where}: 'sites' must be a non-empty list of site names", path=str(p))
        require(record, "start_url", str, p, where)
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
