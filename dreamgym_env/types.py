"""Plain data shared by the env, the experience model, the replay buffer and the curriculum."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Source", "Task", "Transition", "Step"]

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
