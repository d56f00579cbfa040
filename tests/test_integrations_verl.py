"""The verl agent loop: a DreamGym episode in token ids, with the observations masked out.

verl is not installed next to this package's serving stack (it pins other transformers/tokenizers
releases), so the loop is tested against the interface verl 0.9.1 defines
(``verl/experimental/agent_loop/agent_loop.py``): a stand-in module with the same ``AgentLoopBase``
constructor, ``register`` registry and ``AgentLoopOutput`` fields.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import types
from typing import Any

import pytest
from pydantic import BaseModel

from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.integrations.verl import AGENT_NAME, environments_for, run_episode
from dreamgym_env.serving.hf_model import CHAT_TEMPLATE
from tests._tiny_policy import tiny_tokenizer
from tests.test_integrations_trl import TOY_ID, room_world, toy_envs

pytest.importorskip("transformers")

PLAN = ["go[2]", "go[3]", "go[1]"]  # two moves that change nothing, then the winning one


@functools.cache
def chatml_tokenizer() -> Any:
    tok = tiny_tokenizer(texts=["You did go[2]. Task: Reach room 1 Admissible actions: go[1]; stop"] * 20)
    tok.chat_template = CHAT_TEMPLATE  # prefix-preserving ChatML
    return tok


class PlanPolicy:
    """Generates the plan's actions, each ending with the end-of-turn token, logprob -0.25 per token."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self.prompts: list[list[int]] = []

    async def __call__(self, prompt_ids: list[int]) -> tuple[list[int], list[float] | None]:
        self.prompts.append(list(prompt_ids))
        ids = self.tok(PLAN[len(self.prompts) - 1], add_special_tokens=False)["input_ids"] + [
            self.tok.eos_token_id
        ]
        return ids, [-0.25] * len(ids)


def test_episode_tokens_mask_the_observations_and_keep_the_policys_tokens() -> None:
    tok = chatml_tokenizer()
    envs = toy_envs(ScriptedBackend(room_world))
    env = envs()
    seen: list[str] = []
    act = env.act

    def recording_act(action: str) -> str:
        seen.append(act(action))
        return seen[-1]

    env.act = recording_act  # type: ignore[method-assign]
    policy = PlanPolicy(tok)
    row = envs.rows()[0]
    out = asyncio.run(run_episode(env, row, policy, tok, max_turns=5))

    assert out.actions == PLAN and out.reward == 1.0 and out.success and out.num_turns == 1 + 2 * len(PLAN)
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs or [])
    policy_text = tok.decode([t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m])
    env_text = tok.decode([t for t, m in zip(out.response_ids, out.response_mask, strict=True) if not m])
    assert policy_text == "".join(f"{a}<|im_end|>" for a in PLAN)
    assert "You did go[2]." in env_text and "You did go[3]." in env_text
    assert all(
        lp == (-0.25 if m else 0.0)
        for lp, m in zip(out.response_logprobs or [], out.response_mask, strict=True)
    )
    # The whole sequence is what the chat template renders for the episode's conversation.
    chat = [dict(m) for m in row["prompt"]]
    chat[-1]["content"] = tok.decode(out.prompt_ids).split("<|im_start|>user\n")[1].split("<|im_end|>")[0]
    for action, observation in zip(PLAN, [*seen[:-1], None], strict=True):
        chat.append({"role": "assistant", "content": action})
        if observation is not None:
            chat.append({"role": "user", "content": observation})
    rendered = tok.apply_chat_template(chat, tokenize=True, return_dict=False)
    sequence = out.prompt_ids + out.response_ids
    assert rendered[: len(sequence)] == sequence
    # Each generation saw everything before it.
    assert policy.prompts[1] == sequence[: len(policy.prompts[1])]


def test_response_length_cuts_the_episode() -> None:
    tok = chatml_tokenizer()
    envs = toy_envs(ScriptedBackend(room_world))
    out = asyncio.run(run_episode(envs(), envs.rows()[0], PlanPolicy(tok), tok, response_length=5))
    assert len(out.response_ids) == len(out.response_mask) == 5 and out.actions == PLAN[:1]


def _stand_in_verl(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """verl 0.9.1's agent-loop interface, as its source defines it (constructor, registry, output)."""
    registry: dict[str, dict[str, str]] = {}

    class AgentLoopMetrics(BaseModel):
        generate_sequences: float = 0.0
        tool_calls: float = 0.0

    class AgentLoopOutput(BaseModel):
        prompt_ids: list[int]
        response_ids: list[int]
        response_mask: list[int]
        response_logprobs: list[float] | None = None
        reward_score: float | None = None
        num_turns: int = 0
        metrics: AgentLoopMetrics
        extra_fields: dict[str, Any] = {}

    class AgentLoopBase:
        def __init__(
            self, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any, **kwargs: Any
        ) -> None:
            self.config = trainer_config.config
            self.rollout_config = self.config.actor_rollout_ref.rollout
            self.server_manager = server_manager
            self.tokenizer = tokenizer
            self.apply_chat_template_kwargs: dict[str, Any] = {}

    def register(name: str) -> Any:
        def decorator(cls: type) -> type:
            registry[name] = {"_target_": f"{cls.__module__}.{cls.__qualname__}"}
            return cls

        return decorator

    module = types.ModuleType("verl.experimental.agent_loop.agent_loop")
    module.AgentLoopBase = AgentLoopBase  # type: ignore[attr-defined]
    module.AgentLoopOutput = AgentLoopOutput  # type: ignore[attr-defined]
    module.register = register  # type: ignore[attr-defined]
    for name in ("verl", "verl.experimental", "verl.experimental.agent_loop"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop.agent_loop", module)
    return registry


def test_agent_loop_registers_and_returns_what_verls_trainer_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = _stand_in_verl(monkeypatch)
    import dreamgym_env.integrations.verl as adapter

    monkeypatch.delitem(adapter.__dict__, "DreamGymAgentLoop", raising=False)
    loop_class = adapter.DreamGymAgentLoop
    assert registry[AGENT_NAME]["_target_"].endswith("DreamGymAgentLoop")

    tok = chatml_tokenizer()
    plan = PlanPolicy(tok)

    class Server:
        def __init__(self) -> None:
            self.request_ids: set[str] = set()

        async def generate(
            self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]
        ) -> Any:
            self.request_ids.add(request_id)
            ids, logprobs = await plan(prompt_ids)
            return types.SimpleNamespace(token_ids=ids, log_probs=logprobs)

    rollout = types.SimpleNamespace(response_length=512)
    config = types.SimpleNamespace(
        config=types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(rollout=rollout))
    )
    server = Server()
    env_kwargs = {"backend": ScriptedBackend(room_world), "max_steps": 5, "system_prompt": "Reach the room."}
    toy_envs(ScriptedBackend(room_world))  # registers the toy id
    loop = loop_class(
        trainer_config=config,
        server_manager=server,
        tokenizer=tok,
        processor=None,
        name=AGENT_NAME,  # hydra passes the YAML entry's keys through
        env_id=TOY_ID,
        env_kwargs=env_kwargs,
        max_turns=5,
    )
    envs = environments_for(TOY_ID, env_kwargs)
    row = {**envs.rows()[0], "agent_name": AGENT_NAME, "raw_prompt": envs.prompt()}
    output = asyncio.run(loop.run({"temperature": 1.0}, **row))
    assert output.reward_score == 1.0 and output.num_turns == 7 and output.extra_fields["actions"] == PLAN
    assert sum(output.response_mask) == sum(len(tok(a)["input_ids"]) + 1 for a in PLAN)
    assert 0 in output.response_mask and len(server.request_ids) == 1  # one sticky id per episode
    assert environments_for(TOY_ID, env_kwargs) is envs and envs._free  # the env went back to the pool


def test_without_verl_the_loop_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import dreamgym_env.integrations.verl as adapter
    from dreamgym_env.errors import DependencyNotInstalled

    monkeypatch.setitem(sys.modules, "verl", None)
    monkeypatch.delitem(adapter.__dict__, "DreamGymAgentLoop", raising=False)
    with pytest.raises(DependencyNotInstalled, match="verl"):
        adapter.DreamGymAgentLoop  # noqa: B018


def test_logprobs_of_another_length_than_the_tokens_are_refused() -> None:
    """A generator whose logprobs do not line up with its tokens would shift every later token's logprob."""
    tok = chatml_tokenizer()
    env = toy_envs(ScriptedBackend(room_world))()
    policy = PlanPolicy(tok)

    async def short_logprobs(prompt_ids: list[int]) -> tuple[list[int], list[float] | None]:
        ids, logprobs = await policy(prompt_ids)
        return ids, (logprobs or [])[:-1]

    with pytest.raises(ValueError, match="token ids but .* logprobs"):
        asyncio.run(run_episode(env, toy_envs(ScriptedBackend(room_world)).rows()[0], short_logprobs, tok))
