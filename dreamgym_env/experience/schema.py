"""The experience model's answer: what it must emit, as a pydantic model and a JSON schema.

Field order matters: ``reasoning`` comes first so the model thinks before it commits to a next state
(the paper's chain of thought), and structured decoding emits fields in schema order.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ExperienceOutput", "output_json_schema"]


class ExperienceOutput(BaseModel):
    """One predicted transition."""

    model_config = ConfigDict(extra="forbid")

    reasoning: str = Field(description="Step-by-step reasoning about the effect of the action.")
    next_state: str = Field(description="The next state, in the domain's abstract textual format.")
    admissible_actions: list[str] = Field(
        default_factory=list, description="Actions available in the next state (empty if open-ended)."
    )
    done: bool = Field(description="Whether the episode ends with this transition.")
    success: bool = Field(description="Whether the task has been accomplished (only meaningful if done).")


_BASE_SCHEMA = ExperienceOutput.model_json_schema()


def output_json_schema(
    *,
    max_reasoning_chars: int | None = None,
    max_state_chars: int | None = None,
    max_actions: int | None = None,
    max_action_chars: int | None = None,
) -> dict[str, Any]:
    """Return the JSON schema sent as ``response_format``, with optional length caps.

    Length caps are enforced by vLLM's structured decoding, so a weak or small model cannot ramble
    until ``max_tokens`` and leave truncated, unparsable JSON behind.
    """
    schema = copy.deepcopy(_BASE_SCHEMA)
    schema["required"] = list(ExperienceOutput.model_fields)
    props = schema["properties"]
    for prop in props.values():
        prop.pop("default", None)
    if max_reasoning_chars is not None:
        props["reasoning"]["maxLength"] = max_reasoning_chars
    if max_state_chars is not None:
        props["next_state"]["maxLength"] = max_state_chars
    if max_actions is not None:
        props["admissible_actions"]["maxItems"] = max_actions
    if max_action_chars is not None:
        props["admissible_actions"]["items"]["maxLength"] = max_action_chars
    return schema
