"""Plain data shared by the env, the experience model, the replay buffer and the curriculum."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TASK_METADATA = "task_metadata"
"""Transition metadata key: the task's hidden facts (:attr:`Task.metadata`) the experience model is shown."""
ADMISSIBLE_ACTIONS = "admissible_actions"
"""Transition metadata key: the admissible actions of the next state (after the step)."""
PREV_ADMISSIBLE_ACTIONS = "prev_admissible_actions"
"""Transition metadata key: the admissible actions of the state the action was taken in."""
GAME_ID = "game_id"
"""Transition metadata key: the game (the world, its layout and goal) a task is played in, where several
task ids play one game (ALFWorld's ReAct file plays each game twice, as ``act_X`` and ``react_X``); a
held-out split keeps each game on one side (:attr:`Transition.game_id`). Absent: the task is its game."""

Source = Literal["offline", "sim", "real"]
"""Where a transition came from: imported real data, the simulator, or a live real environment."""


class Task(BaseModel):
    """One instruction an agent must carry out in a domain."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    domain: str
    instruction: str
    # Domain-specific facts the simulator may use (WebShop goal attributes and price limit, ALFWorld task
    # type and objects, WebArena site and start url...). Never shown verbatim to the agent.
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str = "seed"
    parent_id: str | None = None


class Step(BaseModel):
    """One (state, action) pair of an episode's history, as the experience model sees it."""

    model_config = ConfigDict(frozen=True)

    state: str
    action: str


class Transition(BaseModel):
    """One real or simulated transition (s, a) -> (s', r, done), the replay buffer's unit."""

    domain: str
    task_id: str
    task: str
    episode_id: str
    step: int
    state: str
    action: str
    next_state: str
    reward: float = 0.0
    done: bool = False
    success: bool = False
    source: Source = "sim"
    reasoning: str | None = None
    timestamp: float = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of_step(
        cls,
        task: Task,
        *,
        episode_id: str,
        step: int,
        state: str,
        action: str,
        next_state: str,
        reward: float,
        done: bool,
        success: bool,
        source: Source,
        prev_admissible_actions: Sequence[str] = (),
        admissible_actions: Sequence[str] = (),
        task_metadata: Mapping[str, Any] | None = None,
        reasoning: str | None = None,
        domain: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Transition:
        """The stored form of one step of ``task``, with the metadata ``dreamgym build-sft`` rebuilds requests from.

        Every writer of transitions (the simulated env, the real wrappers, the sim-to-real env, the
        offline loaders, collection scripts) goes through here, so each stored row carries the same
        keys: :data:`TASK_METADATA` (default the whole :attr:`Task.metadata`), :data:`ADMISSIBLE_ACTIONS`
        (after the step) and :data:`PREV_ADMISSIBLE_ACTIONS` (before it), then ``metadata``'s own keys.
        """
        facts = dict(task.metadata if task_metadata is None else task_metadata)
        return cls(
            domain=domain or task.domain,
            task_id=task.task_id,
            task=task.instruction,
            episode_id=episode_id,
            step=step,
            state=state,
            action=action,
            next_state=next_state,
            reward=reward,
            done=done,
            success=success,
            source=source,
            reasoning=reasoning,
            metadata={
                TASK_METADATA: facts,
                ADMISSIBLE_ACTIONS: list(admissible_actions),
                PREV_ADMISSIBLE_ACTIONS: list(prev_admissible_actions),
                **dict(metadata or {}),
            },
        )

    @property
    def task_metadata(self) -> dict[str, Any]:
        """The task's hidden facts stored with this transition (empty when its writer had none)."""
        return dict(self.metadata.get(TASK_METADATA) or {})

    @property
    def game_id(self) -> str:
        """The game this transition was played in: its metadata's :data:`GAME_ID`, else its task id."""
        return str(self.metadata.get(GAME_ID) or self.task_id)

    @property
    def admissible_actions(self) -> list[str]:
        """The admissible actions after the step (empty when unknown, e.g. most offline data)."""
        return list(self.metadata.get(ADMISSIBLE_ACTIONS) or [])

    @property
    def prev_admissible_actions(self) -> list[str]:
        """The admissible actions before the step (empty when unknown)."""
        return list(self.metadata.get(PREV_ADMISSIBLE_ACTIONS) or [])
