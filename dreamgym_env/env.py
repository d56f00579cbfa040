"""DreamGymEnv: one episode of a world simulated by an LLM experience model."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from dreamgym_env._runner import run_sync
from dreamgym_env.config import EnvConfig, split_overrides
from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.errors import DreamGymError, InvalidActionError
from dreamgym_env.experience.backends import Backend, make_backend
from dreamgym_env.experience.model import ExperienceModel, Prediction
from dreamgym_env.retrieval import RetrievalQuery, Retriever
from dreamgym_env.spaces import FreeText
from dreamgym_env.tasks import TaskSampler, as_task_sampler, resolve_task
from dreamgym_env.types import Step, Task, Transition

__all__ = ["DreamGymEnv", "render_episode"]

_FEEDBACK_CHARS = 1024  # room for an invalid-action message in front of the state


class DreamGymEnv(gym.Env[str, str]):
    """A text environment whose transitions are predicted by an LLM experience model.

    ## Description
    Each ``step`` sends the task, the episode's history, the top-k most similar transitions from a
    replay buffer and the current (state, action) to an experience model (an LLM served by vLLM or any
    OpenAI-compatible server), which reasons, then predicts the next abstract state, the admissible
    actions and whether the episode ended in success (DreamGym, Chen et al. 2025).

    ## Action Space
    ``FreeText(max_action_chars)``: one action string in the domain's grammar, e.g.
    ``search[red running shoes]`` (WebShop), ``go to cabinet 1`` (ALFWorld), ``click('12')`` (WebArena).

    ## Observation Space
    ``FreeText``: the abstract textual state (clean element listings, not raw HTML).

    ## Starting State
    The domain builds the first state for the sampled task from ``self.np_random``.

    ## Rewards
    Outcome-based and binary: 1.0 on the final step of a successful episode, else 0.0.

    ## Episode End
    Terminated when the model says ``done``; truncated after ``max_steps`` steps (WebShop 15, ALFWorld
    50, WebArena 30 by default).

    An action that is empty, too long or outside the grammar is not sent to the model: the state is
    unchanged, the observation starts with ``[Invalid action]`` and ``info["last_action_error"]``
    says why; reward 0, and the step counts. A non-string action raises :class:`InvalidActionError`.

    ## Information
    ``task``, ``task_id``, ``episode_id``, ``step``, ``admissible_actions``, ``success``,
    ``reasoning``, ``simulated`` (True), ``source`` ("sim"), ``last_action_error``, and after model
    calls ``usage`` (token counts) and ``timing`` (model and client-side seconds).

    ## Arguments
    ``domain``: name or :class:`Domain`. ``tasks``: list of :class:`Task` or a sampler (curriculum);
    default the domain's seed tasks. ``retriever``: replay buffer for demonstrations. ``backend``: a
    :class:`Backend` or its name. ``config``: :class:`EnvConfig`. Any config field may also be given
    as a keyword (``base_url``, ``model``, ``top_k``, ``temperature``...).

    ## Experience Model
    One structured-output request per transition; unparsable answers are retried ``parse_retries``
    times, then handled by ``on_invalid_output``. An unreachable server raises
    :class:`ServerUnreachableError` within the configured timeout and retries.

    ## Determinism
    Registered as nondeterministic: LLM serving is not bit-reproducible. Tasks, initial states and
    per-request sampling seeds come from ``reset(seed=...)``; exact replays come from the recording
    backend.

    ## Version History
    * v0: Initial version.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}
    observation_space: FreeText
    action_space: FreeText

    def __init__(
        self,
        domain: str | Domain,
        *,
        tasks: Sequence[Task] | TaskSampler | None = None,
        retriever: Retriever | None = None,
        backend: Backend | str | None = None,
        config: EnvConfig | None = None,
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        self.domain = get_domain(domain)
        if isinstance(backend, str):
            overrides["backend"] = backend
            backend = None
        self.config = split_overrides(config, overrides)
        self._owns_backend = backend is None
        self.backend = backend if backend is not None else make_backend(self.config.backend)
        self.model = ExperienceModel(self.domain, self.backend, self.config)
        self.retriever = retriever
        self.task_sampler = as_task_sampler(tasks if tasks is not None else self.domain.seed_tasks())
        self.max_steps = self.config.max_steps or self.domain.max_steps
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise DreamGymError(
                f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.observation_space = FreeText(max_length=self.config.max_state_chars + _FEEDBACK_CHARS)
        self.action_space = FreeText(max_length=self.config.max_action_chars)

        self._task: Task | None = None
        self._episode_id = ""
        self._state = ""
        self._obs = ""
        self._admissible: list[str] = []
        self._history: list[Step] = []
        self._step = 0
        self._ended = True

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on a sampled task, or on ``options["task"]`` (Task, dict, id or instruction)."""
        super().reset(seed=seed)
        options = options or {}
        if "task" in options and options["task"] is not None:
            task = resolve_task(options["task"], self.domain.name, self.task_sampler)
        else:
            task = self.task_sampler.sample(self.np_random)
        initial = self.domain.initial_state(task, self.np_random)
        self._task = task
        self._episode_id = str(uuid.UUID(bytes=self.np_random.bytes(16), version=4))
        self._state = self._obs = initial.state
        self._admissible = list(initial.admissible_actions)
        self._history = []
        self._step = 0
        self._ended = False
        return self._obs, self._info(success=False, reasoning="")

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Advance the episode by one model-predicted transition."""
        return run_sync(self.astep(action))

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Coroutine form of :meth:`step`; the vector env awaits many of these at once."""
        if self._task is None:
            raise DreamGymError("Call reset() before step().")
        if self._ended:
            raise DreamGymError(
                "The episode has ended (terminated or truncated); call reset() to start another."
            )
        if not isinstance(action, str):
            raise InvalidActionError(
                f"Actions are strings in the {self.domain.name} grammar, got {type(action).__name__}: {action!r}. "
                f"{self.domain.action_help}"
            )
        error = self._action_error(action)
        if error is not None:
            self._step += 1
            self._obs = f"[Invalid action] {error}\n\n{self._state}"[-self.observation_space.max_length :]
            return self._finish(0.0, terminated=False, success=False, reasoning="", last_action_error=error)

        started = time.perf_counter()
        demos = self._retrieve(action)
        retrieve_s = time.perf_counter() - started
        prediction = await self.model.apredict(
            self._task,
            self._history,
            demos,
            self._state,
            action,
            self._admissible,
            seed=int(self.np_random.integers(2**31 - 1)),
            episode_id=self._episode_id,
        )
        # Only now does the step count: a backend error above leaves the episode as it was, so the
        # caller may retry the same step once the server is back.
        self._step += 1
        extra = _timing_info(prediction, retrieve_s, time.perf_counter() - started)
        output = prediction.output
        if output is None:  # on_invalid_output == "fail_state": the world stays as it was
            self._obs = self._state
            return self._finish(
                0.0, terminated=False, success=False, reasoning="", model_error=prediction.error, **extra
            )

        success = output.done and output.success
        reward = 1.0 if success else 0.0
        transition = Transition(
            domain=self.domain.name,
            task_id=self._task.task_id,
            task=self._task.instruction,
            episode_id=self._episode_id,
            step=self._step - 1,
            state=self._state,
            action=action,
            next_state=output.next_state,
            reward=reward,
            done=output.done,
            success=success,
            source="sim",
            reasoning=output.reasoning,
        )
        self._history.append(Step(state=self._state, action=action))
        self._state = self._obs = output.next_state
        self._admissible = list(output.admissible_actions)
        if self.retriever is not None and self.config.store_transitions == "all":
            self.retriever.add(transition)
        return self._finish(
            reward, terminated=output.done, success=success, reasoning=output.reasoning, **extra
        )

    def render(self) -> str | None:
        """``ansi``: return the task and current state; ``human``: print them."""
        return render_episode(self.render_mode, self._task, self._step, self._obs)

    def close(self) -> None:
        """Release the backend's connections if this env created it."""
        if self._owns_backend:
            run_sync(self.backend.aclose())
        super().close()

    # ------------------------------------------------------------------ helpers
    @property
    def task(self) -> Task | None:
        """The current episode's task."""
        return self._task

    @property
    def history(self) -> list[Step]:
        """The (state, action) pairs of the current episode so far."""
        return list(self._history)

    def _action_error(self, action: str) -> str | None:
        if not action.strip():
            return f"The action is empty. {self.domain.action_help}"
        if len(action) > self.config.max_action_chars:
            return (
                f"The action has {len(action)} characters; at most {self.config.max_action_chars} are accepted "
                "(max_action_chars)."
            )
        return self.domain.validate_action(action, self._admissible)

    def retrieval_query(self, action: str) -> RetrievalQuery | None:
        """The demonstrations request ``step(action)`` would make now, or ``None`` if it would make none.

        A vector env collects these from all its sub-envs to answer them in one batched search.
        """
        if self._task is None or self._ended or not isinstance(action, str) or self._action_error(action):
            return None
        return self._query(action)

    def _query(self, action: str) -> RetrievalQuery | None:
        if self.retriever is None or self.config.top_k == 0:
            return None
        return RetrievalQuery(self._state, action, self.config.top_k, self.domain.name, self._episode_id)

    def _retrieve(self, action: str) -> list[Transition]:
        query = self._query(action)
        if query is None or self.retriever is None:
            return []
        return self.retriever.retrieve(
            query.state, query.action, query.k, domain=query.domain, exclude_episode=query.exclude_episode
        )

    def _finish(
        self, reward: float, *, terminated: bool, success: bool, reasoning: str, **extra: Any
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        truncated = not terminated and self._step >= self.max_steps
        if terminated or truncated:
            self._ended = True
            assert self._task is not None
            self.task_sampler.record_outcome(self._task, reward, success)
        info = self._info(success=success, reasoning=reasoning, **extra)
        if self.render_mode == "human":
            self.render()
        return self._obs, reward, terminated, truncated, info

    def _info(self, *, success: bool, reasoning: str, **extra: Any) -> dict[str, Any]:
        assert self._task is not None
        info: dict[str, Any] = {
            "task": self._task.instruction,
            "task_id": self._task.task_id,
            "episode_id": self._episode_id,
            "step": self._step,
            "admissible_actions": list(self._admissible),
            "success": success,
            "reasoning": reasoning,
            "simulated": True,
            "source": "sim",
            "last_action_error": None,
        }
        info.update(extra)
        return info


def render_episode(render_mode: str | None, task: Task | None, step: int, observation: str) -> str | None:
    """The text both simulated and real envs render: ``ansi`` returns it, ``human`` prints it."""
    if render_mode is None:
        return None
    text = f"Task: {task.instruction if task else '(not reset)'}\nStep {step}\n{observation}"
    if render_mode == "human":
        print(text)
        return None
    return text


def _timing_info(prediction: Prediction, retrieve_s: float, total_s: float) -> dict[str, Any]:
    completion = prediction.completion
    model_s = completion.latency_s if completion else 0.0
    return {
        "usage": completion.usage() if completion else {},
        "attempts": prediction.attempts,
        "timing": {
            "total_s": total_s,
            "model_s": model_s,
            "retrieve_s": retrieve_s,
            "build_s": prediction.build_s,
            "parse_s": prediction.parse_s,
        },
    }
