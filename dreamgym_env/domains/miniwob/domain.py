"""MiniWoB++: small synthetic web tasks (click a button, fill a form, pick from a list) in BrowserGym's format.

The pages are MiniWoB++'s own (the ``miniwob`` package), played through BrowserGym in the real env
(``DreamGym/MiniWoB-Real-v0``). A task is one MiniWoB task name with one seed: the seed fixes the
page and its utterance, so the simulated episode starts from the very page the real one does. The
first pages shipped with the package (``data/miniwob_tasks.jsonl``) were recorded from real resets by
:func:`dreamgym_env.domains.miniwob.engine.record_miniwob_tasks`; record more with it and load them with
:meth:`MiniWoBDomain.load_tasks`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from dreamgym_env.domains import BUILTIN_DOMAINS
from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.domains.task_files import read_jsonl, require
from dreamgym_env.domains.webarena import WebArenaDomain
from dreamgym_env.errors import DataFormatError, DomainError
from dreamgym_env.records import Task

MINIWOB_DISPLAY_URL = "http://localhost/miniwob/"
"""The base URL states show MiniWoB pages under, whatever actually serves them (a loopback server on
some port, a ``file://`` folder), so a recorded page reads the same on every machine."""

_MINIWOB_TASKS_FILE = Path(__file__).parent.parent / "data" / "miniwob_tasks.jsonl"
"""The packaged tasks: one JSON object a line with ``miniwob_task``, ``seed``, ``instruction``, ``state``."""


_PAGE_BASE = re.compile(r"""(?:https?|file)://[^\s'"]*?/miniwob/(?=[\w.-]+\.html)""")


def miniwob_display_urls(state: str) -> str:
    """``state`` with every MiniWoB page URL moved under :data:`MINIWOB_DISPLAY_URL`.

    ``http://127.0.0.1:40801/miniwob/click-button.html`` or ``file:///.../miniwob/click-button.html``
    becomes ``http://localhost/miniwob/click-button.html``: the real env and the loader of recorded
    runs write the same page whatever served it.
    """
    return _PAGE_BASE.sub(MINIWOB_DISPLAY_URL, state)


def _miniwob_task_id(name: str, seed: int) -> str:
    """The task id of MiniWoB task ``name`` with page seed ``seed``: ``miniwob.<name>-<seed>``."""
    return f"miniwob.{name}-{seed}"


def miniwob_task(name: str, seed: int, instruction: str, state: str | None = None) -> Task:
    """A MiniWoB :class:`Task`: its page seed and, when recorded, its first page in ``metadata``."""
    metadata: dict[str, object] = {"miniwob_task": name, "seed": int(seed)}
    if state is not None:
        metadata["initial_state"] = state
    return Task(
        task_id=_miniwob_task_id(name, seed),
        domain="miniwob",
        instruction=instruction,
        metadata=metadata,
        source="miniwob",
    )


def load_miniwob_tasks(path: str | os.PathLike[str] = _MINIWOB_TASKS_FILE) -> list[Task]:
    """Read recorded MiniWoB tasks (JSON lines: ``miniwob_task``, ``seed``, ``instruction``, ``state``).

    Raises:
        DataFormatError: A line is not JSON or lacks one of the keys (the message names the line).
    """
    p = Path(path)
    if not p.is_file():
        raise DataFormatError("file not found; record tasks with record_miniwob_tasks", path=str(p))
    tasks = []
    for line, record in read_jsonl(p):
        where = f"line {line}"
        name = require(record, "miniwob_task", str, p, where, line)
        seed = require(record, "seed", int, p, where, line)
        instruction = require(record, "instruction", str, p, where, line)
        state = require(record, "state", str, p, where, line)
        tasks.append(miniwob_task(name, seed, instruction, state))
    return tasks


_INSTRUCTIONS = """\
You simulate MiniWoB++: small synthetic web pages, each holding one task (click the right button or \
link, tick checkboxes, type into a field, log in, pick from a list, choose a date...), played in a \
browser through BrowserGym. You receive the agent's browser action and answer with the page the \
browser shows next.

How the pages behave
- A page is small (a query area and a few widgets) and behaves like a web form: buttons and links \
respond to clicks, text fields take what is typed, checkboxes toggle, lists select options. Keep every \
element, name and id consistent with the history.
- Element ids are the numbers in brackets. click('12') activates element 12; fill('12', 'text') types \
into a field (replacing its value); select_option('12', 'value') picks an option of a list; \
press('12', 'Enter') sends a key; focus('12') focuses an element; hover('12'), dblclick('12'), \
clear('12') and drag_and_drop('3', '7') do what they say; noop() waits.
- The page ends the episode itself: most tasks end at the first decisive action (a click on any \
button or link of the task, a submit); then the page stays as it was.

State format (tab line(s), the URL, then the page's accessibility tree as BrowserGym lists it: one \
node a line, indented by one tab per level, as [id] role 'name' followed by its properties; text \
without an id cannot be acted on; generic lines are the page's plain containers and spans, and a \
generic holding a text is clickable like a link):
Tab 0 (current): Click Button Task
URL: http://localhost/miniwob/click-button.html
RootWebArea 'Click Button Task', focused, url='http://localhost/miniwob/click-button.html'
\t[8] generic
\t\t[9] generic
\t\t\t[12] generic
\t\t\t\tStaticText 'faucibus in nibh'
\t\t\t[13] button 'no'
\t\t\t[15] button 'Ok'
\t\t\t[19] textbox ''

Invalid or ineffective actions
An action on an id that is not on the page, or one the element does not support, leaves the page \
unchanged, done=false, success=false. A click on plain text does nothing visible: return the same page.

Ending and success
- done is true when the page ends the episode (the task was attempted: the right or a wrong button \
clicked, the form submitted).
- success is true only when the task as the instruction states it was accomplished exactly (the \
button named, every checkbox asked for and no other, the text typed exactly, the right item). \
Anything else that ends the episode is done=true, success=false.

admissible_actions: return an empty list; the agent's action space is open."""


class MiniWoBDomain(Domain):
    """MiniWoB++ as an abstract text world, with BrowserGym's actions and accessibility-tree listing.

    State format: the tab line(s), ``URL: ...``, then the page's accessibility tree exactly as
    BrowserGym's ``flatten_axtree_to_str`` writes it (``[bid] role 'name'`` lines indented by depth),
    the format of ``DreamGym/MiniWoB-Real-v0`` and of AgentLab's logs. Page URLs are shown under
    :data:`MINIWOB_DISPLAY_URL`.

    Starting state: the task's recorded first page (``metadata["initial_state"]``), taken from a real
    reset with the task's seed; ``rng`` is unused. ``admissible_actions`` is empty
    (:attr:`open_actions`).

    Actions: BrowserGym's high-level primitives, the grammar of ``DreamGym/WebArena-v0``.

    Episode end: when the page ends it (MiniWoB's own rule); success when MiniWoB's reward is
    positive. Truncated after 10 steps.
    """

    name = "miniwob"
    env_id = "DreamGym/MiniWoB-v0"
    max_steps = BUILTIN_DOMAINS[name].max_steps  # the one definition: the domain table
    task_fact_keys = ("miniwob_task",)
    instructions = _INSTRUCTIONS
    open_actions = True
    action_help = (
        "MiniWoB actions (BrowserGym, element ids from the page as strings): click('12'), "
        "dblclick('12'), hover('12'), focus('12'), clear('12'), fill('12', 'text'), press('12', 'Enter'), "
        "select_option('12', 'value'), drag_and_drop('3', '7'), scroll(0, 200), noop()."
    )
    action_patterns = WebArenaDomain.action_patterns

    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        """The task's recorded first page; ``rng`` is unused (the seed in the task fixes the page)."""
        state = task.metadata.get("initial_state")
        if not isinstance(state, str) or not state.strip():
            raise DomainError(
                f"MiniWoB task {task.task_id!r} has no recorded first page (metadata['initial_state']). "
                "Record tasks from real resets with dreamgym_env.real.miniwob.record_miniwob_tasks and "
                "load them with MiniWoBDomain.load_tasks(path), or use the packaged tasks."
            )
        return InitialState(state=state, admissible_actions=[])

    def seed_tasks(self) -> list[Task]:
        """The packaged tasks (:data:`_MINIWOB_TASKS_FILE`), one per distinct utterance.

        Some MiniWoB tasks say the same thing on every page ("Focus into the textbox."); a task
        sampler draws by instruction, so only the first page of each utterance is kept here.
        :meth:`load_tasks` returns every recorded page.
        """
        tasks: dict[str, Task] = {}
        for task in load_miniwob_tasks(_MINIWOB_TASKS_FILE):
            tasks.setdefault(task.instruction, task)
        return list(tasks.values())

    @classmethod
    def load_tasks(cls, path: str | os.PathLike[str]) -> list[Task]:
        """Load tasks recorded by :func:`dreamgym_env.domains.miniwob.engine.record_miniwob_tasks`."""
        return load_miniwob_tasks(path)
