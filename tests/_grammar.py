"""What the structured-output grammar guarantees about an answer, whatever the model generates."""

from __future__ import annotations

from dreamgym_env.experience.schema import ExperienceOutput


def answer_token_bound(
    max_reasoning_chars: int, max_state_chars: int, max_actions: int, max_action_chars: int
) -> int:
    """The most tokens an :class:`ExperienceOutput` answer under these caps can take.

    Compact JSON (no whitespace between tokens: ``SMOKE_SERVER_ARGS``), each string character at most
    6 bytes (a ``\\uXXXX`` escape), each token at least one byte. With ``max_tokens`` at this bound the
    grammar guarantees that the answer closes and stops, however weak the model.
    """
    skeleton = ExperienceOutput.model_construct(
        reasoning="", next_state="", admissible_actions=[""] * max_actions, done=False, success=False
    ).model_dump_json()
    return len(skeleton) + 6 * (max_reasoning_chars + max_state_chars + max_actions * max_action_chars)
