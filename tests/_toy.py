"""A minimal domain for unit tests that must not depend on the built-in domains' details."""

from __future__ import annotations

import numpy as np

from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.records import Task


class ToyDomain(Domain):
    name = "toy"
    env_id = "DreamGym/Toy-v0"
    max_steps = 4
    instructions = "A toy world: rooms numbered 1-3. State format: 'Room N.'"
    action_help = "Actions: go[N] or stop."
    action_patterns = (r"go\[\d\]", r"stop")

    def seed_tasks(self) -> list[Task]:
        return [Task(task_id=f"toy-{i}", domain="toy", instruction=f"Reach room {i}") for i in range(1, 4)]

    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        room = int(rng.integers(1, 4))
        return InitialState(f"Room {room}.", [f"go[{i}]" for i in range(1, 4)] + ["stop"])
