"""Assemble the experience model's prompt, ordered for vLLM's prefix cache.

Order, from most shared to least: the domain's fixed instructions (shared by every request of the
domain), the task (shared by an episode), the history (append-only, so step t+1's prompt extends step
t's), then the per-step retrieved demonstrations and the current state and action last. Anything that
changes per step stays after everything that does not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from dreamgym_env.config import PromptStyle
from dreamgym_env.domains.base import Domain
from dreamgym_env.records import Step, Task, Transition

OUTPUT_INSTRUCTIONS = """\
You are the environment. Given the task, the interaction so far, similar real transitions and the agent's
current state and action, predict what the environment does next. Answer with one JSON object:
- "reasoning": think step by step about the action's effect, first;
- "next_state": the next state, in exactly the state format above;
- "admissible_actions": the actions available in the next state (empty if the domain has none to list);
- "done": true if the episode ends with this transition;
- "success": true only if the episode ends and the task has been accomplished.
Invalid or ineffective actions leave the world unchanged: describe that in "next_state" as the real
environment would, with done false unless the domain says otherwise. Never invent progress."""


def build_messages(
    domain: Domain,
    task: Task,
    history: Sequence[Step],
    demonstrations: Sequence[Transition],
    state: str,
    action: str,
    admissible_actions: Sequence[str] = (),
    *,
    style: PromptStyle = "full",
    step_facts: str = "",
) -> list[dict[str, str]]:
    """Return the chat messages for one transition request.

    ``style="full"`` opens with the domain's instructions and the answer format, for any instructed
    model. ``style="compact"`` is for a model fine-tuned on the domain's transitions, which has learned
    the rules from its data: no instructions, and the task's prose left out when the domain's hidden
    task facts (its layout and winning conditions) say what the model needs. A shorter prompt is both
    cheaper to serve and less to learn. ``step_facts`` (:meth:`Domain.describe_step`) are the hidden
    facts that bear on this step; a compact prompt shows them instead of the task facts they come
    from (:attr:`Domain.step_fact_keys`).
    """
    keys = (
        [k for k in domain.task_fact_keys if k not in domain.step_fact_keys] if style == "compact" else None
    )
    facts = domain.describe_task(task, keys)
    if style == "compact":
        system = f"Simulate {domain.name}: answer the next transition."
    else:
        system = f"{domain.instructions.strip()}\n\n{OUTPUT_INSTRUCTIONS}"
    show_instruction = style == "full" or not facts
    user = "".join(
        [
            _task_section(task, facts, show_instruction),
            _history_section(history),
            _demonstrations_section(domain, task, demonstrations, show_instruction),
            _current_step_section(
                state, action, () if domain.lists_actions else admissible_actions, step_facts
            ),
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _task_section(task: Task, task_facts: str, show_instruction: bool) -> str:
    """The task; ``task_facts`` are the goal's details the agent does not see but success depends on."""
    facts = (
        f"\nGoal details (hidden from the agent, for judging success):\n{task_facts}\n" if task_facts else ""
    )
    instruction = f"{task.instruction}\n" if show_instruction else ""
    return f"# Task\n{instruction}{facts}\n"


def _history_section(history: Sequence[Step]) -> str:
    """The steps so far, oldest first."""
    steps = "".join(
        f"## Step {i}\nState:\n{step.state}\nAction: {step.action}\n\n"
        for i, step in enumerate(history, start=1)
    )
    return "# Interaction so far\n" + (steps or "(first step)\n\n")


def _demonstrations_section(
    domain: Domain, task: Task, demonstrations: Sequence[Transition], show_instruction: bool
) -> str:
    """The retrieved real transitions, each outcome written as the model's answer (:meth:`Domain.state_answer`).

    So the examples show the answer form too. A demonstration of the same task says so instead of
    repeating the task's text, which also tells the model that its world is this one. Action lists are
    JSON arrays, the form the answer uses; a domain that lists actions itself shows none.
    """
    if not demonstrations:
        return ""
    parts = ["# Similar real transitions\n"]
    for i, demo in enumerate(demonstrations, start=1):
        if demo.task_id == task.task_id:
            source = "same task"
        else:
            source = f"task: {demo.task}" if show_instruction else "another task"
        listed = None if domain.lists_actions else demo.metadata.get("admissible_actions")
        next_actions = f"Next admissible actions: {json.dumps(list(listed))}\n" if listed else ""
        parts.append(
            f"## Example {i} ({source})\nState:\n{demo.state}\nAction: {demo.action}\n"
            f"Next state:\n{domain.state_answer(demo.state, demo.next_state)}\n{next_actions}"
            f"Done: {str(demo.done).lower()}, success: {str(demo.success).lower()}\n\n"
        )
    return "".join(parts)


def _current_step_section(state: str, action: str, admissible_actions: Sequence[str], step_facts: str) -> str:
    """The step to predict, last, since it changes every step.

    ``admissible_actions`` are the current state's: the next state's list usually differs from it by a
    few entries, so the model edits rather than invents it.
    """
    listed_now = f"Admissible actions: {json.dumps(list(admissible_actions))}\n" if admissible_actions else ""
    nearby = f"Hidden facts for this step:\n{step_facts}\n" if step_facts else ""
    return f"# Current step\n{nearby}State:\n{state}\n{listed_now}Action: {action}\n\nPredict the next state."
