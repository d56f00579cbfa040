"""A DreamGym episode as one of verl's multi-turn agent loops.

verl (>= 0.5) runs multi-turn rollouts through *agent loops*: for each dataset row, its rollout
worker instantiates the class registered under the row's ``agent_name`` and awaits
``run(sampling_params, **row)``, which talks to verl's inference servers in token ids
(``server_manager.generate(request_id=..., prompt_ids=..., sampling_params=...)``) and returns an
``AgentLoopOutput``: ``prompt_ids``, ``response_ids`` (everything after the prompt: the policy's
tokens *and* the environment's), a ``response_mask`` (1 for the policy's tokens, 0 for the rest, so
the loss never covers what the simulator said), ``response_logprobs``, ``reward_score`` and
``num_turns``.

:class:`DreamGymAgentLoop` (registered as ``"dreamgym_agent"``) plays one episode: the row's task is
reset (its first observation fills the prompt's user turn), then each turn the policy generates an
action, the env steps, and the observation's tokens are appended with mask 0, until the episode ends,
the turn limit or the response length is reached. ``reward_score`` is the episode's return.

The token bookkeeping lives in :func:`run_episode`, which needs no verl: it takes any async
``generate(prompt_ids) -> (token_ids, logprobs)`` and a Hugging Face tokenizer. verl itself pins
versions of transformers and tokenizers that this package's serving stack does not use, so it is not
installed alongside: the tests run against the real verl in a venv of its own
(``scripts/install_integrations.sh``; see ``docs/training_rl.md``).

Configure the env in the agent loop's YAML (``actor_rollout_ref.rollout.agent.agent_loop_config_path``)::

    - name: dreamgym_agent
      _target_: dreamgym_env.integrations.verl.DreamGymAgentLoop
      env_id: DreamGym/TextWorld-v0
      env_kwargs: {base_url: "http://127.0.0.1:8001/v1", model: experience-model, max_steps: 20}
      max_turns: 20

and give each row ``agent_name: dreamgym_agent``, ``prompt`` (verl's ``raw_prompt``) and the task
(:meth:`~dreamgym_env.integrations.episodes.DreamGymEnvironments.rows` builds them; write them with
``datasets.Dataset.from_list(rows).to_parquet(path)``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dreamgym_env.errors import ConfigError
from dreamgym_env.integrations.episodes import DreamGymToolEnv, environments_for

__all__ = ["AGENT_NAME", "EpisodeTokens", "environments_for", "run_episode"]

#: The name the agent loop is registered under in verl (``agent_name`` of a dataset row).
AGENT_NAME = "dreamgym_agent"

Generate = Callable[[list[int]], Awaitable[tuple[list[int], list[float] | None]]]
"""``await generate(prompt_ids)`` gives the policy's sampled token ids and, if known, their logprobs."""


@dataclass
class EpisodeTokens:
    """One episode in token ids, as verl's ``AgentLoopOutput`` wants it.

    Attributes:
        prompt_ids: The chat prompt up to the first generation (system, task and first observation).
        response_ids: Everything after it: the policy's tokens and the observations' tokens.
        response_mask: 1 for each token the policy generated, 0 for the environment's.
        response_logprobs: The policy's logprob for each generated token, 0.0 for the others; None
            when the generator reported none.
        reward: The episode's return.
        num_turns: Chat turns (user, assistant, user, ...), as verl counts them.
        success: The episode ended with the task achieved.
        actions: The actions sent to the env.
    """

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] | None = field(default_factory=list)
    reward: float = 0.0
    num_turns: int = 1
    success: bool = False
    actions: list[str] = field(default_factory=list)

    def _add(self, ids: Sequence[int], mask: int, logprobs: Sequence[float] | None) -> None:
        if logprobs is not None and len(logprobs) != len(ids):
            raise ValueError(
                f"The generator returned {len(ids)} token ids but {len(logprobs)} logprobs; "
                "verl needs exactly one logprob per generated token."
            )
        self.response_ids.extend(int(t) for t in ids)
        self.response_mask.extend([mask] * len(ids))
        if self.response_logprobs is not None:
            if logprobs is None and mask:
                self.response_logprobs = None
            else:
                self.response_logprobs.extend(float(x) for x in logprobs or [0.0] * len(ids))

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` response tokens (verl's ``response_length``)."""
        del self.response_ids[length:], self.response_mask[length:]
        if self.response_logprobs is not None:
            del self.response_logprobs[length:]


async def run_episode(
    env: DreamGymToolEnv,
    row: Mapping[str, Any],
    generate: Generate,
    tokenizer: Any,
    *,
    max_turns: int = 50,
    response_length: int | None = None,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> EpisodeTokens:
    """Play one episode of ``row``'s task with the policy behind ``generate``, in token ids.

    The observation after each action is tokenised as the chat template renders a user turn and the
    next assistant header after an assistant turn (measured on a fixed two-turn chat, as TRL does for
    tool results), so the sequence the policy conditions on is what the template gives the whole chat.

    Args:
        env: A rollout environment (reset here).
        row: The dataset row: ``prompt`` or ``raw_prompt`` (a chat ending with a user turn the first
            observation is appended to) and the task column.
        generate: The policy.
        tokenizer: The policy's Hugging Face tokenizer (its chat template renders the turns).
        max_turns: Actions at most.
        response_length: Stop, and cut, once the response holds this many tokens.
        chat_template_kwargs: Extra arguments for ``apply_chat_template``.
    """
    kwargs = dict(chat_template_kwargs or {})
    prompt = row.get("raw_prompt", row.get("prompt"))
    if not prompt:
        raise ConfigError(f"The row has no 'raw_prompt' or 'prompt' chat; got columns {sorted(row)}.")
    messages = [dict(m) for m in prompt]
    first = await asyncio.to_thread(env.reset, **dict(row))
    messages[-1] = {**messages[-1], "content": str(messages[-1].get("content", "")) + first}

    def render(chat: list[dict[str, Any]], generation: bool) -> list[int]:
        ids = tokenizer.apply_chat_template(
            chat, add_generation_prompt=generation, tokenize=True, return_dict=False, **kwargs
        )
        return [int(t) for t in ids]

    dummy = [{"role": "user", "content": "?"}, {"role": "assistant", "content": "!"}]
    before = render(dummy, False)
    ends = [i for i, t in enumerate(before) if t == tokenizer.eos_token_id]
    before = before[: ends[-1] + 1] if ends else before  # what follows the end-of-turn is the user's

    def observation_ids(observation: str) -> list[int]:
        after = render([*dummy, {"role": "user", "content": observation}], True)
        if after[: len(before)] != before:
            raise ConfigError(
                "The chat template renders an assistant turn differently once a user turn follows it, "
                "so observation tokens cannot be appended after the policy's; use a prefix-preserving "
                "template (e.g. the model family's training template)."
            )
        return after[len(before) :]

    out = EpisodeTokens(prompt_ids=render(messages, True))
    eos = tokenizer.eos_token_id
    for _ in range(max_turns):
        token_ids, logprobs = await generate(out.prompt_ids + out.response_ids)
        out._add(token_ids, 1, logprobs)
        action = tokenizer.decode(token_ids, skip_special_tokens=True).strip()
        out.actions.append(action)
        observation = await asyncio.to_thread(env.act, action)
        out.num_turns += 2
        if env.done or (response_length is not None and len(out.response_ids) >= response_length):
            break
        # The end-of-turn token is the observation's if generation stopped without it.
        closing = [] if token_ids and token_ids[-1] == eos else ([eos] if eos is not None else [])
        out._add(closing + observation_ids(observation), 0, None)
    episode = env.episode
    out.reward = env.get_reward()
    out.success = bool(episode.success) if episode is not None else False
    if response_length is not None:
        out.truncate(response_length)
    return out


def _define_agent_loop() -> Any:
    """Define and register the verl agent loop (only where verl is installed).

    The class is defined here, on first access, so importing this module needs no verl; its
    ``__qualname__`` is set to the module-level name, so the ``_target_`` that ``register`` records
    (``module.qualname``) is one ``hydra.utils.instantiate`` can locate. An entry already registered
    under :data:`AGENT_NAME` is kept: verl's worker loads the agent-loop YAML (with ``env_id``,
    ``env_kwargs``...) before the first rollout imports this class, and registering over it would
    drop that configuration for every later rollout.
    """
    from verl.experimental.agent_loop import agent_loop as verl_agent_loop
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopOutput,
        register,
    )

    class DreamGymAgentLoop(AgentLoopBase):  # type: ignore[misc]
        """verl's agent loop for one DreamGym episode (see the module docstring)."""

        def __init__(
            self,
            *args: Any,
            env_id: str | None = None,
            env_kwargs: Mapping[str, Any] | None = None,
            max_turns: int = 50,
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.env_id = env_id
            self.env_kwargs = dict(env_kwargs or {})
            self.max_turns = max_turns

        async def run(self, sampling_params: dict[str, Any], **row: Any) -> Any:
            env_id = self.env_id or row.get("env_id")
            if not env_id:
                raise ConfigError(
                    "No DreamGym env id: set env_id in the agent loop's config or an env_id column."
                )
            envs = environments_for(str(env_id), self.env_kwargs)
            request_id = uuid.uuid4().hex  # one id per episode: its requests stick to one server

            async def generate(prompt_ids: list[int]) -> tuple[list[int], list[float] | None]:
                output = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
                )
                return list(output.token_ids), output.log_probs

            env = envs.acquire()
            started = time.perf_counter()
            try:
                tokens = await run_episode(
                    env,
                    row,
                    generate,
                    self.tokenizer,
                    max_turns=self.max_turns,
                    response_length=self.rollout_config.response_length,
                    chat_template_kwargs=self.apply_chat_template_kwargs,
                )
            finally:
                envs.release(env)
            return AgentLoopOutput(
                prompt_ids=tokens.prompt_ids,
                response_ids=tokens.response_ids,
                response_mask=tokens.response_mask,
                response_logprobs=tokens.response_logprobs,
                reward_score=tokens.reward,
                num_turns=tokens.num_turns,
                metrics={"generate_sequences": time.perf_counter() - started},
                extra_fields={"success": tokens.success, "actions": tokens.actions},
            )

    DreamGymAgentLoop.__qualname__ = "DreamGymAgentLoop"
    registry = getattr(verl_agent_loop, "_agent_loop_registry", None)
    if registry is None or AGENT_NAME not in registry:
        register(AGENT_NAME)(DreamGymAgentLoop)
    return DreamGymAgentLoop


def __getattr__(name: str) -> Any:
    if name == "DreamGymAgentLoop":
        try:
            loop = _define_agent_loop()
        except ImportError as e:
            from dreamgym_env.errors import DependencyNotInstalled

            raise DependencyNotInstalled(
                "verl",
                "verl",
                "The verl agent loop",
                install="Install verl (pip install verl) with the transformers version it supports.",
            ) from e
        globals()[name] = loop
        return loop
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
