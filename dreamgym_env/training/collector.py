"""Group rollouts of a language-model policy, as chat trajectories with rewards and group advantages.

LLM-RL trainers (GRPO and its relatives) need, for each task, a *group* of ``n`` episodes played by
the current policy, the reward of each, and the advantage of each relative to its group. This module
produces exactly that from any DreamGym env id, simulated or real:

* :class:`ChatPolicy` asks a model behind an OpenAI-compatible endpoint (vLLM, SGLang...) for the next
  action, given the whole episode so far as a chat. Where the state lists admissible actions, vLLM's
  structured outputs restrict the answer to one of them; elsewhere to the domain's action grammar.
* :func:`collect_groups` plays ``group_size`` episodes of every task concurrently and returns a
  :class:`RolloutBatch` of :class:`Trajectory` (chat messages, rewards, advantages).

Each trajectory is the conversation the policy saw: a system message, then alternating ``user``
(observation) and ``assistant`` (action) turns, so the batch feeds chat-format trainers directly
(see :mod:`dreamgym_env.training.trl_format`).
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from dreamgym_env._event_loop import run_sync
from dreamgym_env._openai_client import async_client, endpoint_errors
from dreamgym_env.agent_chat import default_observation_message, default_reset_options, default_system_prompt
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import ConfigError, DependencyNotInstalled
from dreamgym_env.records import Task
from dreamgym_env.rollout import (
    AdvantageScale,
    Episode,
    EpisodeJob,
    aplay_episodes,
    aplay_on_envs,
    group_advantages,
    is_simulated,
)

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""


@dataclass(frozen=True)
class ActionSample:
    """One decision of the policy: the action's text and, where the policy reports them, its tokens.

    Token-level trainers (PPO, GRPO with importance sampling) need the ids the policy actually sampled
    and their log-probabilities under the sampling policy; re-tokenising the text can give other ids.

    Attributes:
        text: The action, as sent to the env.
        token_ids: The sampled completion's token ids (vLLM's ``return_token_ids``), or None.
        logprobs: One log-probability per entry of ``token_ids``, or None.
        prompt_token_ids: The prompt as the server tokenised it, or None.
    """

    text: str
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None


class ChatPolicyProtocol(Protocol):
    """What :func:`collect_groups` needs from a policy: the next action for a conversation."""

    async def act(self, messages: Sequence[Message], admissible_actions: Sequence[str]) -> str | ActionSample:
        """Return the next action given the conversation so far and the state's admissible actions.

        A plain string is enough; an :class:`ActionSample` also carries token ids and logprobs into
        the exports.
        """
        ...


@dataclass
class Trajectory:
    """One episode as the policy saw it, with its outcome and its advantage within its group.

    Attributes:
        messages: ``system``, then ``user`` (observation) / ``assistant`` (action) turns, ending with
            the last action.
        task_id: The task's id; every trajectory of a group shares it.
        task: The task's instruction.
        group_id: Identifies the group (one task, ``group_size`` episodes).
        rewards: Per-step rewards.
        reward: The episode's return (sum of ``rewards``), the quantity advantages compare.
        advantage: ``reward`` relative to its group (see :func:`group_advantages`).
        success: The episode ended with the task achieved.
        terminated: The env ended the episode (won or lost).
        truncated: The step limit ended it.
        source: ``"sim"`` or ``"real"``, from ``info["source"]``.
        final_observation: What the env answered to the last action (no turn follows it).
        samples: One :class:`ActionSample` per action, in order (token ids and logprobs where the
            policy reported them).
    """

    messages: list[Message]
    task_id: str
    task: str
    group_id: str
    rewards: list[float] = field(default_factory=list)
    reward: float = 0.0
    advantage: float = 0.0
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    source: str = ""
    final_observation: str = ""
    samples: list[ActionSample] = field(default_factory=list)

    @property
    def num_turns(self) -> int:
        """Number of actions taken."""
        return sum(m["role"] == "assistant" for m in self.messages)

    @property
    def prompt(self) -> list[Message]:
        """The messages before the first action (system and first observation)."""
        first = next((i for i, m in enumerate(self.messages) if m["role"] == "assistant"), len(self.messages))
        return self.messages[:first]

    @property
    def completion(self) -> list[Message]:
        """The messages from the first action on: the policy's turns and the env's answers."""
        return self.messages[len(self.prompt) :]

    @property
    def has_tokens(self) -> bool:
        """Every action carries the token ids the policy sampled."""
        return bool(self.samples) and all(s.token_ids is not None for s in self.samples)

    def _outcome(self) -> dict[str, Any]:
        return {
            "reward": float(self.reward),
            "advantage": float(self.advantage),
            "success": bool(self.success),
            "num_turns": self.num_turns,
            "task_id": self.task_id,
            "task": self.task,
            "group_id": self.group_id,
            "source": self.source,
        }

    def to_record(self) -> dict[str, Any]:
        """A flat dict of plain values (lists of messages, floats, strings): one dataset row.

        With :attr:`has_tokens`, ``completion_ids`` and ``completion_logprobs`` hold one list per
        action.
        """
        record: dict[str, Any] = {
            "messages": [dict(m) for m in self.messages],
            "prompt": [dict(m) for m in self.prompt],
            "completion": [dict(m) for m in self.completion],
            **self._outcome(),
        }
        if self.has_tokens:
            record["completion_ids"] = [list(s.token_ids or []) for s in self.samples]
            record["completion_logprobs"] = [list(s.logprobs or []) for s in self.samples]
        return record

    def decisions(self) -> list[dict[str, Any]]:
        """One row per action: ``prompt`` is the episode up to it, ``completion`` the action alone.

        This is the form in which a prompt-completion trainer (TRL's SFT with its default
        completion-only loss, DPO, GRPO's offline variants) trains the agent's tokens and nothing the
        env said. Each row carries the episode's outcome (``reward``, ``advantage``, ...), its
        ``turn`` index, and, with :attr:`has_tokens`, the action's ``completion_ids`` and
        ``completion_logprobs`` (plus ``prompt_ids`` where the server reported them).
        """
        rows = []
        turn = 0
        for i, message in enumerate(self.messages):
            if message["role"] != "assistant":
                continue
            row: dict[str, Any] = {
                "prompt": [dict(m) for m in self.messages[:i]],
                "completion": [dict(message)],
                "turn": turn,
                **self._outcome(),
            }
            if self.has_tokens:
                sample = self.samples[turn]
                row["completion_ids"] = list(sample.token_ids or [])
                row["completion_logprobs"] = list(sample.logprobs or [])
                if all(s.prompt_token_ids is not None for s in self.samples):
                    row["prompt_ids"] = list(sample.prompt_token_ids or [])
            rows.append(row)
            turn += 1
        return rows


@dataclass
class RolloutBatch:
    """Trajectories of several groups, in task order, ``group_size`` consecutive ones per task."""

    trajectories: list[Trajectory]
    group_size: int

    def __len__(self) -> int:
        return len(self.trajectories)

    @property
    def groups(self) -> list[list[Trajectory]]:
        """The trajectories split into their groups."""
        n = self.group_size
        return [self.trajectories[i : i + n] for i in range(0, len(self.trajectories), n)]

    @property
    def success_rate(self) -> float:
        """Fraction of successful episodes."""
        return float(np.mean([t.success for t in self.trajectories])) if self.trajectories else 0.0

    def reward_variance(self) -> dict[str, float]:
        """Per task, the group reward variance ``mean((r - mean r)^2)``: what the curriculum ranks by."""
        return {g[0].task_id: float(np.var([t.reward for t in g])) for g in self.groups if g}

    def to_records(self) -> list[dict[str, Any]]:
        """One plain dict per trajectory (see :meth:`Trajectory.to_record`)."""
        return [t.to_record() for t in self.trajectories]


class ChatPolicy:
    """A policy served behind an OpenAI-compatible chat endpoint (vLLM, SGLang, any compatible server).

    The answer is constrained with vLLM's structured outputs: to ``choice`` among the admissible
    actions when the state lists some, else to ``regex`` over the domain's action grammar (when
    ``action_patterns`` are given). No per-request ``seed`` is sent: sampling diversity within a group
    is what GRPO needs, and vLLM's CPU build fails on seeded chunked prefills.

    Args:
        base_url: The endpoint, e.g. ``http://127.0.0.1:8000/v1``.
        model: The served model name.
        api_key: Key for the endpoint (vLLM accepts any when started without one).
        temperature: Sampling temperature; keep it above 0 so that a group's episodes differ.
        max_tokens: Longest answer.
        action_patterns: Regular expressions of the action grammar, used when no admissible list is
            given (``Domain.action_patterns``).
        timeout_s: Per-request timeout.
        max_retries: Retries of the OpenAI client (connection errors, 5xx, 429).
        extra_body: Extra request fields, merged after the structured-output constraint.
        return_tokens: Also ask for the sampled token ids, the prompt's ids (vLLM's
            ``return_token_ids``) and their logprobs; :meth:`act` then returns an
            :class:`ActionSample` that carries them into the exports.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        temperature: float = 1.0,
        max_tokens: int = 48,
        action_patterns: Sequence[str] = (),
        timeout_s: float = 60.0,
        max_retries: int = 2,
        extra_body: Mapping[str, Any] | None = None,
        return_tokens: bool = False,
    ) -> None:
        self.base_url = base_url
        self.return_tokens = return_tokens
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.action_patterns = tuple(action_patterns)
        self.extra_body = dict(extra_body or {})
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._client: Any = None
        self._client_loop: Any = None  # a weak reference to the event loop the client belongs to

    def _client_for_this_loop(self) -> Any:
        """The HTTP client of the running event loop, made on first use in it.

        An async client's connections belong to the loop that opened them: reused from another loop
        (a second ``asyncio.run``, a new notebook cell) they fail with "Event loop is closed".
        """
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is None or self._client_loop() is not loop:
            self._client = async_client(
                self.base_url, api_key=self._api_key, timeout_s=self._timeout_s, max_retries=self._max_retries
            )
            self._client_loop = weakref.ref(loop)
        return self._client

    async def act(self, messages: Sequence[Message], admissible_actions: Sequence[str]) -> str | ActionSample:
        """Ask the model for the next action of the conversation ``messages``."""
        client = self._client_for_this_loop()
        body: dict[str, Any] = {}
        if admissible_actions:
            body["structured_outputs"] = {"choice": list(dict.fromkeys(admissible_actions))}
        elif self.action_patterns:
            body["structured_outputs"] = {"regex": "|".join(f"(?:{p})" for p in self.action_patterns)}
        if self.return_tokens:
            body["return_token_ids"] = True
        body.update(self.extra_body)
        with endpoint_errors("The policy endpoint", self.base_url, model=self.model, api_key=self._api_key):
            response = await client.chat.completions.create(
                model=self.model,
                messages=list(messages),
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                logprobs=self.return_tokens,
                extra_body=body,
            )
        choice = response.choices[0]
        text = (choice.message.content or "").strip()
        if not self.return_tokens:
            return text
        return _sample_from(text, response, choice)

    async def aclose(self) -> None:
        """Close the HTTP client (a client of another event loop, no longer usable, is dropped)."""
        client, loop = self._client, self._client_loop
        self._client = self._client_loop = None
        if client is not None and loop is not None and loop() is asyncio.get_running_loop():
            await client.close()


def _sample_from(text: str, response: Any, choice: Any) -> ActionSample:
    """The token ids and logprobs a vLLM answer reports (None where the server sent none)."""
    token_ids = getattr(choice, "token_ids", None)
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    logprobs = [float(t.logprob) for t in content] if content else None
    prompt_ids = getattr(response, "prompt_token_ids", None)
    return ActionSample(
        text,
        token_ids=[int(t) for t in token_ids] if token_ids is not None else None,
        logprobs=logprobs,
        prompt_token_ids=[int(t) for t in prompt_ids] if prompt_ids is not None else None,
    )


def collect_groups(
    env_id: str,
    tasks: Sequence[Task],
    policy: ChatPolicyProtocol,
    group_size: int = 8,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    seed: int = 0,
    advantage_scale: AdvantageScale = "std",
    max_concurrency: int = 64,
    system_prompt: str | None = None,
    observation_message: Callable[[str, Mapping[str, Any], bool], str] = default_observation_message,
    reset_options: Callable[[Task], dict[str, Any]] = default_reset_options,
    progress: bool = False,
) -> RolloutBatch:
    """Play ``group_size`` episodes of every task with ``policy``, concurrently; return the trajectories.

    Simulated ids run on one :class:`~dreamgym_env.vector.DreamGymVectorEnv` (``gymnasium.make_vec``,
    ``autoreset_mode=DISABLED``) through its public async step
    (:func:`~dreamgym_env.rollout.aplay_episodes`): one shared backend, one connection pool and
    concurrency bound for every episode's experience-model requests; at each step the policy is asked
    for all live episodes' actions at once, then one vector step sends every transition request
    together and searches the replay buffer once for all of them. A sub-env whose episode ends starts
    the next one. Ids without a concurrent vector env (the real wrappers) get one env per episode
    slot, each stepped in a worker thread as soon as its own policy answer arrives.

    Args:
        env_id: A registered id, e.g. ``DreamGym/TextWorld-v0`` or ``DreamGym/TextWorld-Real-v0``.
        tasks: The tasks; each is played ``group_size`` times.
        policy: A :class:`ChatPolicy`, or anything with ``async act(messages, admissible_actions)``.
        group_size: Episodes per task (GRPO's ``n``).
        env_kwargs: Keyword arguments for ``gymnasium.make`` / ``make_vec`` (``base_url``, ``model``,
            ``max_steps``, ``game_files``...).
        seed: Episode ``k`` (in task-major order) resets with seed ``seed + k``.
        advantage_scale: See :func:`group_advantages`.
        max_concurrency: Episodes in flight at once (the number of envs created).
        system_prompt: First message of every trajectory; default :func:`default_system_prompt`.
        observation_message: Renders ``(observation, info, is_first)`` as a user turn.
        reset_options: Reset options that start a task (see :func:`default_reset_options`).
        progress: Show a progress bar of finished episodes (tqdm).

    Returns:
        A :class:`RolloutBatch`: ``len(tasks) * group_size`` trajectories, task-major.

    Raises:
        ConfigError: ``group_size`` or ``max_concurrency`` below 1, or no tasks.
    """
    if group_size < 1 or max_concurrency < 1:
        raise ConfigError(
            f"group_size and max_concurrency must be >= 1, got {group_size} and {max_concurrency}."
        )
    if not tasks:
        raise ConfigError("collect_groups needs at least one task.")
    groups = [(task, f"{task.task_id}-{uuid.uuid4().hex[:8]}") for task in tasks]
    episodes = [(task, group_id) for task, group_id in groups for _ in range(group_size)]
    slots = min(max_concurrency, len(episodes))
    trajectories = run_sync(
        _play(
            env_id,
            slots,
            dict(env_kwargs or {}),
            episodes,
            _Chats(policy, system_prompt, observation_message),
            seed,
            reset_options,
            progress,
        )
    )
    for start in range(0, len(trajectories), group_size):
        group = trajectories[start : start + group_size]
        for trajectory, adv in zip(
            group, group_advantages([t.reward for t in group], advantage_scale), strict=True
        ):
            trajectory.advantage = float(adv)
    return RolloutBatch(trajectories, group_size)


class _Chats:
    """Keeps each episode's conversation and asks the policy for its next action."""

    def __init__(
        self,
        policy: ChatPolicyProtocol,
        system_prompt: str | None,
        render: Callable[[str, Mapping[str, Any], bool], str],
    ) -> None:
        self.policy = policy
        self.system_prompt = system_prompt
        self.render = render
        self.chats: dict[int, list[Message]] = {}
        self.samples: dict[int, list[ActionSample]] = {}

    async def act(self, k: int, env: Any, observation: str, info: Mapping[str, Any]) -> str:
        """Episode ``k``'s next action: the observation joins its chat, the policy answers."""
        messages = self.chats.get(k)
        if messages is None:
            system = self.system_prompt or default_system_prompt(env)
            messages = self.chats[k] = [{"role": "system", "content": system}]
            messages.append({"role": "user", "content": self.render(observation, info, True)})
        else:
            messages.append({"role": "user", "content": self.render(observation, info, False)})
        answer = await self.policy.act(messages, list(info.get("admissible_actions") or []))
        sample = answer if isinstance(answer, ActionSample) else ActionSample(str(answer))
        messages.append({"role": "assistant", "content": sample.text})
        self.samples.setdefault(k, []).append(sample)
        return sample.text

    def trajectory(self, k: int, episode: Episode, task: Task, group_id: str) -> Trajectory:
        """Episode ``k`` as a :class:`Trajectory` (its chat ends with the last action)."""
        return Trajectory(
            messages=self.chats.get(k, []),
            task_id=task.task_id,
            task=task.instruction,
            group_id=group_id,
            rewards=list(episode.rewards),
            reward=episode.total_reward,
            success=episode.success,
            terminated=episode.terminated,
            truncated=episode.truncated,
            source=episode.source,
            final_observation=episode.observations[-1] if episode.observations else "",
            samples=self.samples.get(k, []),
        )

    async def aclose(self) -> None:
        aclose = getattr(self.policy, "aclose", None)
        if aclose is not None:
            await aclose()


async def _play(
    env_id: str,
    slots: int,
    kwargs: dict[str, Any],
    episodes: list[tuple[Task, str]],
    chats: _Chats,
    seed: int,
    reset_options: Callable[[Task], dict[str, Any]],
    progress: bool,
) -> list[Trajectory]:
    """Play every episode, ``slots`` at a time.

    Simulated ids play on one vector env, through its public async step; the others (real wrappers)
    have no concurrent vector env and get one env per slot, stepped in a thread.
    """
    jobs = [EpisodeJob(seed + k, reset_options(task)) for k, (task, _) in enumerate(episodes)]
    describes: Any = None  # what a default system prompt describes: the domain, or the first env

    async def policy(k: int, observation: str, info: dict[str, Any]) -> str:
        return await chats.act(k, describes, observation, info)

    envs: list[Any] = []
    bar = None
    try:  # every env made so far is closed, also when making a later one fails (a game that won't start)
        bar = _progress_bar(len(jobs)) if progress else None
        on_finish = (lambda k, e: bar.update(1)) if bar is not None else None
        if is_simulated(env_id):
            describes = get_domain(gym.spec(env_id).kwargs["domain"])
            vec = gym.make_vec(
                env_id,
                num_envs=slots,
                vectorization_mode="vector_entry_point",
                autoreset_mode=AutoresetMode.DISABLED,
                **kwargs,
            )
            envs.append(vec)
            played = await aplay_episodes(vec.unwrapped, jobs, policy, on_finish=on_finish)
        else:
            for _ in range(slots):
                envs.append(gym.make(env_id, **kwargs))
            describes = envs[0]
            played = await aplay_on_envs(envs, jobs, policy, on_finish=on_finish)
    finally:
        if bar is not None:
            bar.close()
        await chats.aclose()
        for env in envs:
            await asyncio.to_thread(env.close)
    return [chats.trajectory(k, e, *episodes[k]) for k, e in enumerate(played)]


def _progress_bar(total: int) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError as e:
        raise DependencyNotInstalled("tqdm", "buffer", "The rollout progress bar") from e
    return tqdm(total=total, unit="episode", desc="rollouts")
