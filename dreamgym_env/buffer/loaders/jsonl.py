"""The package's own JSONL format: one :class:`~dreamgym_env.records.Transition` per line.

Each line is a JSON object with the fields of ``Transition`` (``domain``, ``task_id``, ``task``,
``episode_id``, ``step``, ``state``, ``action``, ``next_state`` required; ``reward``, ``done``,
``success``, ``source``, ``reasoning``, ``timestamp``, ``metadata`` optional). ``dreamgym buffer export``
writes this format, so an export imports back unchanged. Consecutive lines with the same
``episode_id`` form one record, stored whole or not at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from dreamgym_env.buffer.loaders.base import LoadIssue, Record, iter_json_lines
from dreamgym_env.buffer.validation import transition_problem
from dreamgym_env.records import Transition


def _summary(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "record"
    return f"{where}: {first['msg']} ({error.error_count()} problem(s); see the Transition fields)"


def _episode_of(obj: object) -> str | None:
    """The episode id a line names, if it names one (a line can be bad and still say whose it is)."""
    if isinstance(obj, dict) and isinstance(obj.get("episode_id"), str):
        return obj["episode_id"]
    return None


def load_jsonl(path: Path, *, domain: str | None = None) -> Iterator[Record | LoadIssue]:
    """Yield one record per run of lines sharing an episode id (``domain`` overrides the stored one).

    A malformed line is reported, and its episode is dropped whole (the lines read of it so far and
    the lines of the same episode that follow), so no episode is stored with a hole in it. A bad line
    that names its episode only costs that episode: when it starts a new one, the episode before it
    is complete and kept. A line that is not even a JSON object cannot say whose it is, so the
    episode it interrupts (if any) is dropped with it.
    """
    run: list[Transition] = []
    run_start = 0
    tainted: str | None = None
    for number, obj in iter_json_lines(path):
        transition: Transition | None = None
        issue = obj if isinstance(obj, LoadIssue) else None
        if issue is None and not isinstance(obj, dict):
            issue = LoadIssue(str(path), number, f"expected a JSON object, got {type(obj).__name__}")
        if issue is None:
            try:
                assert isinstance(obj, dict)
                transition = Transition.model_validate({**obj, "domain": domain} if domain else obj)
            except ValidationError as e:
                issue = LoadIssue(str(path), number, _summary(e))
        if transition is not None:
            problem = transition_problem(transition)
            if problem is not None:
                issue, transition = LoadIssue(str(path), number, problem), None
        if transition is None:
            assert issue is not None
            episode = _episode_of(obj)
            if run and episode is not None and episode != run[0].episode_id:
                yield Record(run, str(path), run_start)  # the bad line starts another episode
                run = []
            if run:
                issue = LoadIssue(
                    str(path),
                    number,
                    f"{issue.message}; episode {run[0].episode_id!r} (from line {run_start}) skipped",
                )
            elif episode is not None:
                issue = LoadIssue(str(path), number, f"{issue.message}; episode {episode!r} skipped")
            tainted = episode if episode is not None else (run[0].episode_id if run else None)
            yield issue
            run = []
            continue
        if transition.episode_id == tainted:
            continue
        tainted = None
        if run and transition.episode_id != run[0].episode_id:
            yield Record(run, str(path), run_start)
            run = []
        if not run:
            run_start = number
        run.append(transition)
    if run:
        yield Record(run, str(path), run_start)
