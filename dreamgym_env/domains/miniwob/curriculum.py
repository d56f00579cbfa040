"""MiniWoB++ in the curriculum: the variant format and the task validator of ``DreamGym/MiniWoB-v0``.

A MiniWoB task is a recorded page (its seed fixes it) and an utterance; a variant keeps the page and
asks for another goal on it (another button, other checkboxes, another text), so the simulator starts
it from the parent's recorded first page.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel, Field

from dreamgym_env.curriculum.formats import INSTRUCTION_FIELD, VariantFormat, VariantModel, describe_metadata
from dreamgym_env.records import Task

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class MiniWoBVariant(VariantModel):
    """A MiniWoB goal on the parent's page."""

    miniwob_task: str = Field(max_length=40, description="The MiniWoB task name, e.g. 'click-button'.")
    instruction: str = INSTRUCTION_FIELD


def _metadata(v: BaseModel, parent: Task) -> dict[str, Any]:
    assert isinstance(v, MiniWoBVariant)
    return {**copy.deepcopy(dict(parent.metadata)), "miniwob_task": v.miniwob_task.strip()}


MINIWOB_FORMAT = VariantFormat(
    MiniWoBVariant,
    "A MiniWoB task keeps its page and its task name (miniwob_task, as the parent's); the variant asks "
    "for another goal that the same page can satisfy, phrased as MiniWoB phrases its utterances: "
    "'Click on the \"Ok\" button.', 'Select nothing and click Submit.', 'Enter \"Kasey\" into the text "
    "field and press Submit.'. Name only elements and values the parent's page shows.",
    describe_metadata("miniwob_task"),
    _metadata,
)
"""MiniWoB goals: the parent's page and task name, another utterance."""


def validate_miniwob(task: Task) -> str | None:
    """MiniWoB: a task name of MiniWoB's form and a recorded first page naming the task's page."""
    name = task.metadata.get("miniwob_task")
    if not isinstance(name, str) or not _NAME.match(name):
        return f"miniwob_task {name!r:.40} is not a MiniWoB task name such as 'click-button'"
    state = task.metadata.get("initial_state")
    if not isinstance(state, str) or not state.strip():
        return "the task has no recorded first page (metadata['initial_state'])"
    if f"{name}.html" not in state:
        return f"the recorded first page is not the page of {name!r}"
    return None
