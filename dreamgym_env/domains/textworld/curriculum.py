"""TextWorld in the curriculum: the variant format and the task validator of ``DreamGym/TextWorld-v0``.

A variant is a new quest played from the parent's first room: the model names the quest's object and
writes the quest as game commands; the task keeps the parent's first state with its quest line
rewritten. The domain table (:data:`dreamgym_env.domains.BUILTIN_DOMAINS`) names both entry points.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel, Field

from dreamgym_env.curriculum.formats import INSTRUCTION_FIELD, VariantFormat, VariantModel, describe_metadata
from dreamgym_env.curriculum.validators import check_phrase, mentions
from dreamgym_env.domains.textworld.domain import TEXTWORLD_VERBS, state_quest, with_quest
from dreamgym_env.records import Task

__all__ = ["TEXTWORLD_FORMAT", "TextWorldVariant", "validate_textworld"]


class TextWorldVariant(VariantModel):
    """A TextWorld quest, played from the parent's first room."""

    object: str = Field(max_length=40, description="The thing the quest is about, named as the game does.")
    instruction: str = INSTRUCTION_FIELD


def _textworld_metadata(v: BaseModel, parent: Task) -> dict[str, Any]:
    """The parent's facts with the new quest: same first room, its quest line rewritten.

    The parent's ``game_file`` is dropped: the real game plays the parent's quest, not this one.
    """
    assert isinstance(v, TextWorldVariant)
    metadata = {k: copy.deepcopy(val) for k, val in parent.metadata.items() if k != "game_file"}
    metadata["object"] = v.object.strip()
    observation = metadata.get("initial_observation")
    if isinstance(observation, str) and observation.strip():
        metadata["initial_observation"] = with_quest(observation, v.instruction)
    return metadata


TEXTWORLD_FORMAT = VariantFormat(
    TextWorldVariant,
    "TextWorld quests are one sentence of game commands in order, lowercase, ending with a full stop: "
    "'take the apple from the table and eat it.', 'go east, open the chest and take the key from it.', "
    "'unlock the safe with the rusty key, then take the map from the safe.'. The commands are go "
    "north|south|east|west, open, close, take ... from, drop, put ... on, insert ... into, unlock ... "
    "with, eat, examine. The quest starts in the parent's first room: use its exits, containers, "
    "supporters and things, named as the room names them; object is the thing the quest is about and "
    "appears in the instruction.",
    describe_metadata("object"),
    _textworld_metadata,
)
"""TextWorld quests: the object and the quest, started in the parent's first room."""


def validate_textworld(task: Task) -> str | None:
    """TextWorld: a quest of game commands that names its object, and a first state that gives it."""
    words = re.findall(r"[a-z]+", task.instruction.lower())
    if not TEXTWORLD_VERBS & set(words):
        return (
            "the quest uses no TextWorld command; write it as the commands to carry out "
            f"({', '.join(sorted(TEXTWORLD_VERBS))}), e.g. 'take the key from the chest and eat the apple.'"
        )
    obj = task.metadata.get("object")
    if obj is not None:
        if not isinstance(obj, str) or check_phrase(obj) is not None:
            return f"object {obj!r:.40} is not a short phrase of words"
        if not mentions(task.instruction, obj):
            return f"the quest does not name its object {obj!r:.40}"
    observation = task.metadata.get("initial_observation")
    if isinstance(observation, str) and observation.strip():
        stated = state_quest(observation)
        if stated is not None and stated.lower().split() != task.instruction.lower().split():
            return f"the task's first state gives another quest ({stated!r:.80}) than its instruction"
    return None
