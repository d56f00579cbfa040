"""The experience model's answer: what it must emit, as a pydantic model and a JSON schema.

Field order matters: ``reasoning`` comes first so the model thinks before it commits to a next state
(the paper's chain of thought), and structured decoding emits fields in schema order.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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


#: The character a fixed answer repeats: one that tokenizers rarely merge, so an answer of L of them is
#: close to L tokens (the benchmark checks the real count in vLLM's ``usage``).
_FIXED_ANSWER_FILLER = "x"


def fixed_answer(chars: int) -> ExperienceOutput:
    """The one answer :func:`fixed_answer_schema` admits: ``chars`` filler characters, never done."""
    if chars < 2:
        raise ValueError(f"A fixed answer needs at least 2 characters, got {chars}.")
    half = chars // 2
    return ExperienceOutput(
        reasoning=_FIXED_ANSWER_FILLER * half,
        next_state=_FIXED_ANSWER_FILLER * (chars - half),
        admissible_actions=[],
        done=False,
        success=False,
    )


def fixed_answer_schema(chars: int) -> dict[str, Any]:
    """A schema with one admissible answer, for throughput measurements: constant work per request.

    Every field is a ``const`` (the reasoning and next state together ``chars`` filler characters,
    no admissible actions, ``done`` and ``success`` false), so under structured decoding every request
    generates the same answer whatever the prompt, and no episode ends before its step limit. Ratios
    between ways of driving the server then compare like with like, instead of the model's luck (how
    long it talks, when it ends an episode).
    """
    answer = fixed_answer(chars).model_dump()
    schema = output_json_schema()
    for name, prop in schema["properties"].items():
        for key in ("maxLength", "maxItems", "items"):
            prop.pop(key, None)
        prop["const"] = answer[name]
    return schema


def pin_fixed_answers(env: Any, chars: int) -> None:
    """Make every request of ``env`` (an env, a wrapped env or a DreamGym vector env) ask for :func:`fixed_answer`.

    For throughput measurements only: each sub-env's experience model sends
    :func:`fixed_answer_schema` instead of the domain's schema, so under structured decoding every
    request costs the same and no episode ends before its step limit.

    Raises:
        ValueError: ``chars`` below 2, or ``env`` holds no experience model.
    """
    schema = fixed_answer_schema(chars)
    base = getattr(env, "unwrapped", env)
    subs = [getattr(e, "unwrapped", e) for e in getattr(base, "envs", [base])]
    # A simulated env's model is its world's (a vector env's sub-envs are plain EpisodeEnvs).
    worlds = [getattr(e, "world", e) for e in subs]
    models = [w.experience_model for w in worlds if hasattr(w, "experience_model")]
    if not models:
        raise ValueError(f"{type(base).__name__} has no experience model to pin the answers of.")
    for model in models:
        model.json_schema = schema
