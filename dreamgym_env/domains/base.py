"""What a domain is: everything about one kind of world that is not the experience model itself."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dreamgym_env.records import Step, Task


def facts_shown(metadata: Mapping[str, Any], fact_keys: Sequence[str]) -> dict[str, Any]:
    """The entries of a task's ``metadata`` under the top keys of ``fact_keys`` (dotted keys name nested values)."""
    keys = {key.split(".")[0] for key in fact_keys}
    return {k: v for k, v in metadata.items() if k in keys}


@dataclass(frozen=True)
class InitialState:
    """The first abstract state of an episode and the actions available in it."""

    state: str
    admissible_actions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StepOutcome:
    """A step's next state and ending as the domain rules them (see :meth:`Domain.judge_step`)."""

    next_state: str
    done: bool
    success: bool


class Domain(ABC):
    """A simulated world: its abstract state format, action grammar, instructions and tasks.

    Subclasses set the class attributes and implement :meth:`initial_state` and :meth:`seed_tasks`.
    The default :meth:`validate_action` checks the action against :attr:`action_patterns`.

    Attributes:
        name: Short lowercase identifier, e.g. ``"webshop"``.
        env_id: The Gymnasium id the domain is registered under, e.g. ``"DreamGym/WebShop-v0"``.
        max_steps: Default episode step limit (truncation). A built-in domain reads its own from
            :data:`dreamgym_env.domains.BUILTIN_DOMAINS`, the one definition (how it is overridden
            per env is said there).
        instructions: The experience model's system text: how this world behaves, the abstract state
            format with an example, what counts as success. Fixed per domain so vLLM's prefix cache
            shares it across every request.
        action_help: One paragraph for agents: the action grammar with examples.
        action_patterns: Regular expressions; an action is well-formed when one matches in full.
        open_actions: True when the set of valid actions is not enumerable (WebArena): then
            ``admissible_actions`` may be empty and agents rely on :attr:`action_help`.
        task_fact_keys: Task metadata keys (dotted for nested values) that the experience model needs
            to judge success but the agent does not see, e.g. WebShop's price limit.
        task_attribute_keys: Task metadata keys that are public, not hidden facts: what the agent's user
            knows of a task (a TextWorld game's challenge family). Kept in the learned view and stored
            with each transition beside the hidden facts (:meth:`stored_task_metadata`), so a rule
            that reads them judges a replayed transition as it judged the live step.
        step_fact_keys: Task fact keys that :meth:`describe_step` shows the relevant part of at each
            step (TextWorld's layout: the rooms next door); a compact prompt leaves them out of the
            task's facts.
        lists_actions: True when :meth:`admissible_actions` lists a state's actions itself, so the
            experience model is not asked for them (its answers leave ``admissible_actions`` empty).
        deterministic: True when, within one task, the same state and action lead to the same next
            state. Then a real transition the replay buffer holds for the step answers it without a
            request (:attr:`~dreamgym_env.config.EnvConfig.replay_real`).
    """

    name: str
    env_id: str
    max_steps: int
    instructions: str
    action_help: str
    action_patterns: Sequence[str] = ()
    open_actions: bool = False
    task_fact_keys: Sequence[str] = ()
    task_attribute_keys: Sequence[str] = ()
    step_fact_keys: Sequence[str] = ()
    lists_actions: bool = False
    deterministic: bool = False

    def __init__(self) -> None:
        self._compiled = [re.compile(p, re.DOTALL) for p in self.action_patterns]

    @abstractmethod
    def seed_tasks(self) -> list[Task]:
        """Tasks written for the package, used when the user gives none."""

    @abstractmethod
    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        """Build the first abstract state for ``task``.

        Randomness (e.g. which receptacles an ALFWorld room has) must come from ``rng`` so that
        ``reset(seed=...)`` is reproducible.
        """

    def validate_action(self, action: str, admissible_actions: Sequence[str] = ()) -> str | None:
        """Return why ``action`` is malformed, or ``None`` when it may be sent to the experience model.

        Grammar only: a well-formed action that makes no sense in the current state is for the
        experience model to answer (with a failure-feedback state), as in the real environment.
        """
        if not self._compiled or any(p.fullmatch(action) for p in self._compiled):
            return None
        return f"'{action}' does not follow the {self.name} action grammar. {self.action_help}"

    def describe_task(self, task: Task, keys: Sequence[str] | None = None) -> str:
        """Facts about ``task`` for the experience model only (the goal's hidden details), or ``""``.

        ``keys`` picks some of :attr:`task_fact_keys` (all by default).
        """
        lines = []
        for key in self.task_fact_keys if keys is None else keys:
            value: object = task.metadata
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if value not in (None, "", [], {}):
                lines.append(f"- {key}: {value}")
        return "\n".join(lines)

    def hidden_facts(self, task: Task) -> dict[str, Any]:
        """The part of ``task.metadata`` the experience model is shown (the top keys of :attr:`task_fact_keys`)."""
        return facts_shown(task.metadata, self.task_fact_keys)

    def stored_task_metadata(self, task: Task) -> dict[str, Any]:
        """What a stored transition keeps of its task: the hidden facts and the public attributes."""
        public = {k: task.metadata[k] for k in self.task_attribute_keys if k in task.metadata}
        return {**self.hidden_facts(task), **public}

    def learned_view(self, task: Task) -> Task:
        """``task`` as a learned dream may see it: without the hidden facts of the real world.

        In the learned setting (:attr:`~dreamgym_env.config.EnvConfig.setting`) the experience model
        knows the instruction and the first state, never the engine's layout, hidden contents or goal
        facts (:attr:`task_fact_keys`). A domain whose facts are part of the task as the agent would
        state it (a WebShop goal's attributes are in its instruction) may keep them by overriding this.
        """
        hidden = {key.split(".")[0] for key in self.task_fact_keys}
        if not hidden & set(task.metadata):
            return task
        kept = {k: v for k, v in task.metadata.items() if k not in hidden}
        return task.model_copy(update={"metadata": kept})

    def describe_step(self, task: Task, history: Sequence[Step], state: str, action: str) -> str:
        """Hidden facts that bear on the step from ``state`` by ``action`` (by default none).

        ``history`` is the whole episode so far, whatever part of it the prompt shows, so a domain can
        bring its task facts up to date with what the episode has shown.
        """
        return ""

    def state_answer(self, state: str, next_state: str) -> str:
        """What the experience model writes for ``next_state`` after ``state``: by default, all of it.

        A domain whose steps change a few lines of a longer state answers with those lines, and
        :meth:`complete_state` rebuilds the state; the two must be inverses.
        """
        return next_state

    def complete_state(self, state: str, answer: str) -> str:
        """The next state an answer stands for, after ``state`` (the inverse of :meth:`state_answer`).

        Raises:
            ValueError: the answer cannot stand for a state after ``state`` (said why); the experience
                model counts it as unparsable.
        """
        return answer

    def admissible_actions(self, state: str, task: Task) -> list[str] | None:
        """The actions ``state`` admits, when the domain can list them itself (see :attr:`lists_actions`).

        ``None`` (the default) leaves the list to the experience model.
        """
        return None

    def rule_state(self, task: Task, history: Sequence[Step], state: str, action: str) -> str | None:
        """The next state when the domain's rules fix it, so the experience model is not asked.

        For actions that by the world's rules never change it (TextWorld's ``look``, ``inventory``,
        ``examine``): the model would only copy the state, at the cost of a request. The state then
        goes through :meth:`judge_step` and :meth:`admissible_actions` like an answer. ``None`` (the
        default) asks the model.
        """
        return None

    def outcomes(self, task: Task, history: Sequence[Step], state: str, action: str) -> list[str] | None:
        """The answers this step can have, written out, for the model to score (:attr:`EnvConfig.rank_outcomes`).

        In the answer form the model writes (:meth:`state_answer`), from what the simulator may know
        (the task's hidden facts in the privileged setting; in the learned one, what the episode showed).
        One answer is the only possible one (the step cannot succeed: it changes nothing); ``None``
        (the default) means the outcome is not known (it shows something new), and the model writes it.
        """
        return None

    def answer_pattern(self, task: Task, history: Sequence[Step], state: str, action: str) -> str | None:
        """A regular expression every answer consistent with the episode matches, for a step without :meth:`outcomes`.

        The answer is decoded to match it (:attr:`EnvConfig.guided_answers`): the model still invents
        what the step shows, in a form that agrees with what is known. ``None`` (the default) leaves it free.
        """
        return None

    def step_kind(self, seen: Sequence[str], state: str, action: str, next_state: str) -> tuple[str, str]:
        """A real step's verb family and kind (``observe``, ``no_change``, ``revealing``, ``determined``).

        What fidelity is reported by: a *determined* step's outcome follows from what the episode showed
        (``seen``: its states before ``state``), a *revealing* one shows something new that a learned
        dream has to invent. By default the action's first word and ``"unknown"``.
        """
        return action.split(" ", 1)[0], "unknown"

    def consistent_reveal(self, state: str, action: str, predicted: str, real: str) -> bool:
        """Whether a predicted revealing step agrees with the real one wherever that one is determined.

        By default only an exact match counts.
        """
        return " ".join(predicted.split()) == " ".join(real.split())

    def judge_step(
        self, task: Task, history: Sequence[Step], state: str, action: str, next_state: str
    ) -> StepOutcome | None:
        """Whether the step from ``state`` by ``action`` to ``next_state`` ends the episode, and how.

        For a domain whose tasks carry checkable winning conditions (TextWorld's ``goal``), the
        outcome follows from the states, so the domain rules it and the experience model only has to
        predict the state; the returned state agrees with the ruling (its result line, say).
        ``history`` is the episode before ``state``. ``None`` (the default) leaves the ending to the
        experience model.
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, env_id={self.env_id!r})"
