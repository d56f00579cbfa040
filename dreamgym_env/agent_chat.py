"""An episode as a chat-model agent sees it: the system prompt, each observation as a user turn, the reset.

The group collector (:mod:`dreamgym_env.training.collector`) and the trainer adapters
(:mod:`dreamgym_env.integrations.episodes`) both show episodes to a language-model policy; one
definition of the turns keeps a policy trained through either seeing the same conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dreamgym_env.records import Task


def default_system_prompt(env: Any) -> str:
    """The system message: the agent's role and the domain's action grammar.

    ``env`` is an env (its ``unwrapped.domain`` is read), a :class:`~dreamgym_env.domains.Domain`, or
    anything else (no grammar then).
    """
    domain = env if hasattr(env, "action_help") else getattr(getattr(env, "unwrapped", env), "domain", None)
    grammar = f" {domain.action_help}" if domain is not None else ""
    return f"You are an agent acting in a text environment. Reply with exactly one action.{grammar}"


def default_observation_message(observation: str, info: Mapping[str, Any], first: bool) -> str:
    """A user turn: the task (first turn only), the observation and the admissible actions."""
    parts = [f"Task: {info.get('task', '')}", observation] if first else [observation]
    actions = info.get("admissible_actions") or []
    if actions:
        parts.append("Admissible actions: " + "; ".join(str(a) for a in actions))
    return "\n\n".join(p for p in parts if p)


def default_reset_options(task: Task) -> dict[str, Any]:
    """Reset options that start ``task`` on simulated and real envs alike.

    Simulated envs read ``task``; real TextWorld/ALFWorld envs read ``game_file``, which tasks from
    :func:`~dreamgym_env.domains.textworld.engine.tasks_from_games` carry in their metadata.
    """
    options: dict[str, Any] = {"task": task}
    if task.metadata.get("game_file"):
        options["game_file"] = task.metadata["game_file"]
    return options
