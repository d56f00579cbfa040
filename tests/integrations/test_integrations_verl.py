"""The verl agent loop: a DreamGym episode in token ids, with the observations masked out.

verl 0.9.1 pins releases of transformers and tokenizers that this package's serving stack does not
use, so it is installed in a venv of its own (``.venv-verl``, made by
``scripts/install_integrations.sh``), where ``scripts/test.sh`` runs this file against the real
package. There the agent-loop tests use verl's own ``AgentLoopBase``, ``register`` and
``AgentLoopOutput`` (``verl/experimental/agent_loop/agent_loop.py``), and the tests marked ``verl``
play whole rollouts through verl's ``AgentLoopWorker``: the agent-loop YAML, the parquet dataset
read by verl's ``RLHFDataset``, the ``LLMServerClient`` and the padded batch the trainer reads. Where
verl is not installed (``.venv``), the agent-loop tests run against a stand-in with verl 0.9.1's
constructor, registry and output fields, and the tests marked ``verl`` are deselected.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from pydantic import BaseModel

from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.integrations.verl import AGENT_NAME, environments_for, run_episode
from tests._toy import ToyDomain
from tests.integrations.test_integrations_trl import TOY_ID, room_world, toy_envs

pytest.importorskip("transformers")

PLAN = ["go[2]", "go[3]", "go[1]"]  # two moves that change nothing, then the winning one
REAL_VERL = importlib.util.find_spec("verl") is not None
LOOP_TARGET = "dreamgym_env.integrations.verl.DreamGymAgentLoop"


@functools.cache
def chatml_tokenizer() -> Any:
    """A byte-level BPE with the prefix-preserving ChatML template (eos ``<|im_end|>``)."""
    import tokenizers
    import transformers

    from dreamgym_env.training.hf_model import train_bpe_tokenizer

    texts = ["You did go[2]. Task: Reach room 1 Admissible actions: go[1]; stop"] * 20
    return train_bpe_tokenizer(transformers, tokenizers, texts, vocab_size=1000, model_max_length=2048)


def policy_turn(tok: Any, prompt_ids: list[int]) -> list[int]:
    """The plan's action for this point of the episode (one per assistant header so far), then eos."""
    turn = tok.decode(prompt_ids).count("<|im_start|>assistant")
    return tok(PLAN[turn - 1], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]


class PlanPolicy:
    """Generates the plan's actions, each ending with the end-of-turn token, logprob -0.25 per token."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self.prompts: list[list[int]] = []

    async def __call__(self, prompt_ids: list[int]) -> tuple[list[int], list[float] | None]:
        self.prompts.append(list(prompt_ids))
        ids = policy_turn(self.tok, prompt_ids)
        return ids, [-0.25] * len(ids)


def trained_text(tok: Any, ids: Any, mask: Any) -> str:
    """The text of the response tokens that carry mask 1 (the ones the loss covers)."""
    return str(tok.decode([int(t) for t, m in zip(ids, mask, strict=True) if int(m)]))


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
    env_text = tok.decode([t for t, m in zip(out.response_ids, out.response_mask, strict=True) if not m])
    assert trained_text(tok, out.response_ids, out.response_mask) == "".join(f"{a}<|im_end|>" for a in PLAN)
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


def _stand_in_verl(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """verl 0.9.1's agent-loop interface, as its source defines it (constructor, registry, output)."""

    class AgentLoopMetrics(BaseModel):
        generate_sequences: float = 0.0
        tool_calls: float = 0.0
        compute_score: float = 0.0
        num_preempted: int = -1

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
            self,
            trainer_config: Any,
            server_manager: Any,
            tokenizer: Any,
            processor: Any,
            dataset_cls: Any,
            data_config: Any,
            hf_model_type: str | None = None,
            **kwargs: Any,
        ) -> None:
            self.config = trainer_config.config
            self.rollout_config = self.config.actor_rollout_ref.rollout
            self.server_manager = server_manager
            self.tokenizer = tokenizer
            self.data_config = data_config.config
            self.apply_chat_template_kwargs = self.data_config.get("apply_chat_template_kwargs", {})

    module = types.ModuleType("verl.experimental.agent_loop.agent_loop")

    def register(name: str) -> Any:
        def decorator(cls: type) -> type:
            module._agent_loop_registry[name] = {"_target_": f"{cls.__module__}.{cls.__qualname__}"}  # type: ignore[attr-defined]
            return cls

        return decorator

    module.AgentLoopBase = AgentLoopBase  # type: ignore[attr-defined]
    module.AgentLoopOutput = AgentLoopOutput  # type: ignore[attr-defined]
    module.register = register  # type: ignore[attr-defined]
    module._agent_loop_registry = {}  # type: ignore[attr-defined]
    package = types.ModuleType("verl.experimental.agent_loop")
    package.agent_loop = module  # type: ignore[attr-defined]
    for name in ("verl", "verl.experimental"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop", package)
    monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop.agent_loop", module)
    return module


@pytest.fixture
def verl_agent_loop(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """verl's ``agent_loop`` module (the real one where verl is installed) with an empty registry.

    The adapter's class is defined afresh on first access, so each test sees it register.
    """
    if REAL_VERL:
        module = importlib.import_module("verl.experimental.agent_loop.agent_loop")
        monkeypatch.setattr(module, "_agent_loop_registry", {})
    else:
        module = _stand_in_verl(monkeypatch)
    import dreamgym_env.integrations.verl as adapter

    monkeypatch.delitem(adapter.__dict__, "DreamGymAgentLoop", raising=False)
    return module


def locate(target: str) -> Any:
    """What ``hydra.utils.instantiate`` finds for ``_target_`` (a module's attribute)."""
    module, _, name = target.rpartition(".")
    return getattr(importlib.import_module(module), name)


class Server:
    """verl's server manager for one policy: ``generate(request_id=..., prompt_ids=..., sampling_params=...)``."""

    def __init__(self, tok: Any) -> None:
        self.plan = PlanPolicy(tok)
        self.request_ids: set[str] = set()

    async def generate(
        self, *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]
    ) -> Any:
        self.request_ids.add(request_id)
        ids, logprobs = await self.plan(prompt_ids)
        return types.SimpleNamespace(token_ids=ids, log_probs=logprobs)


def test_agent_loop_registers_and_returns_what_verls_trainer_reads(verl_agent_loop: types.ModuleType) -> None:
    import dreamgym_env.integrations.verl as adapter

    loop_class = adapter.DreamGymAgentLoop
    assert issubclass(loop_class, verl_agent_loop.AgentLoopBase)
    # The registered target is one hydra.utils.instantiate can locate (not a function's local).
    assert verl_agent_loop._agent_loop_registry[AGENT_NAME] == {"_target_": LOOP_TARGET}
    assert locate(LOOP_TARGET) is loop_class

    tok = chatml_tokenizer()
    rollout = types.SimpleNamespace(response_length=512)
    config = types.SimpleNamespace(
        config=types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(rollout=rollout))
    )
    server = Server(tok)
    env_kwargs = {"backend": ScriptedBackend(room_world), "max_steps": 5, "system_prompt": "Reach the room."}
    toy_envs(ScriptedBackend(room_world))  # registers the toy id
    loop = loop_class(
        trainer_config=config,
        server_manager=server,
        tokenizer=tok,
        processor=None,
        dataset_cls=None,
        data_config=types.SimpleNamespace(config={}),
        name=AGENT_NAME,  # hydra passes the YAML entry's keys through
        env_id=TOY_ID,
        env_kwargs=env_kwargs,
        max_turns=5,
    )
    envs = environments_for(TOY_ID, env_kwargs)
    row = {**envs.rows()[0], "agent_name": AGENT_NAME, "raw_prompt": envs.prompt()}
    output = asyncio.run(loop.run({"temperature": 1.0}, **row))
    assert isinstance(output, verl_agent_loop.AgentLoopOutput)
    assert output.reward_score == 1.0 and output.num_turns == 7 and output.extra_fields["actions"] == PLAN
    assert trained_text(tok, output.response_ids, output.response_mask) == "".join(
        f"{a}<|im_end|>" for a in PLAN
    )
    assert 0 in output.response_mask and len(server.request_ids) == 1  # one sticky id per episode
    assert environments_for(TOY_ID, env_kwargs) is envs and envs._free  # the env went back to the pool


def test_a_loop_already_registered_from_the_yaml_keeps_its_configuration(
    verl_agent_loop: types.ModuleType,
) -> None:
    """verl's worker loads the agent-loop YAML before a rollout first imports the class: that entry stays."""
    import dreamgym_env.integrations.verl as adapter

    entry = {"name": AGENT_NAME, "_target_": LOOP_TARGET, "env_id": TOY_ID, "max_turns": 3}
    verl_agent_loop._agent_loop_registry[AGENT_NAME] = entry
    assert locate(LOOP_TARGET) is adapter.DreamGymAgentLoop
    assert verl_agent_loop._agent_loop_registry[AGENT_NAME] is entry


def test_without_verl_the_loop_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import dreamgym_env.integrations.verl as adapter
    from dreamgym_env.errors import DependencyNotInstalled

    for name in ("verl", "verl.experimental", "verl.experimental.agent_loop"):
        monkeypatch.setitem(sys.modules, name, None)  # also where the real verl was imported already
    monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop.agent_loop", None)
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


# ---------------------------------------------------------------- whole rollouts through the real verl
SCRIPTED_ID = "DreamGym/ToyVerlScripted-v0"


class Remote:
    """A Ray actor method as verl awaits it: ``await handle.method.remote(...)``."""

    def __init__(self, fn: Any) -> None:
        self.remote = fn


class ScriptedReplica:
    """A rollout server replica (``generate`` gives verl's ``TokenOutput``) that plays :data:`PLAN`."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self.calls: list[dict[str, Any]] = []

    @property
    def generate(self) -> Remote:
        from verl.workers.rollout.replica import TokenOutput

        async def generate(
            *, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any
        ) -> Any:
            self.calls.append({"request_id": request_id, "sampling_params": sampling_params})
            ids = policy_turn(self.tok, prompt_ids)
            return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")

        return Remote(generate)


class Balancer:
    """verl's global load balancer actor, with one replica: records the sticky request id of each call."""

    def __init__(self, replica: ScriptedReplica) -> None:
        self.replica = replica
        self.acquired: list[str] = []

    @property
    def require_acquire_fields(self) -> Remote:
        async def fields() -> list[str]:
            return ["request_id"]

        return Remote(fields)

    require_release_fields = require_acquire_fields

    @property
    def acquire_server(self) -> Remote:
        async def acquire(*, request_id: str, **kw: Any) -> tuple[str, Any]:
            self.acquired.append(request_id)
            return "replica-0", self.replica

        return Remote(acquire)

    @property
    def release_server(self) -> Remote:
        return Remote(lambda **kw: None)


@pytest.mark.verl
def test_verls_agent_loop_worker_rolls_out_episodes_from_the_yaml_and_a_parquet_dataset(
    verl_agent_loop: types.ModuleType, tmp_path: Path
) -> None:
    """verl's worker, as its trainer drives it: YAML-registered loop, ``RLHFDataset`` rows, padded batch.

    As in a fresh rollout worker, the registry starts empty and the adapter's class is not defined yet.
    """
    import datasets
    import transformers
    import verl
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
    from verl.workers.rollout.llm_server import LLMServerClient

    if SCRIPTED_ID not in gym.registry:
        gym.register(
            SCRIPTED_ID,
            entry_point="dreamgym_env.env:DreamGymEnv",
            vector_entry_point="dreamgym_env.vector:DreamGymVectorEnv",
            kwargs={"domain": ToyDomain(), "backend": ScriptedBackend(room_world)},
        )
    # The policy: a tokenizer and a model config on disk, as verl's HFModelConfig loads them.
    model_dir = tmp_path / "policy"
    chatml_tokenizer().save_pretrained(model_dir)
    transformers.Qwen2Config(
        vocab_size=len(chatml_tokenizer()),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(model_dir)
    loops = tmp_path / "agent_loops.yaml"
    loops.write_text(
        f"- name: {AGENT_NAME}\n"
        f"  _target_: {LOOP_TARGET}\n"
        f"  env_id: {SCRIPTED_ID}\n"
        "  env_kwargs: {max_steps: 5, system_prompt: Reach the room.}\n"
        "  max_turns: 5\n"
    )
    config = OmegaConf.load(Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml")
    rollout = config.actor_rollout_ref.rollout
    config.actor_rollout_ref.model.path = str(model_dir)
    rollout.name, rollout.prompt_length, rollout.response_length = "vllm", 256, 256
    rollout.agent.agent_loop_config_path = str(loops)

    replica = ScriptedReplica(chatml_tokenizer())
    balancer = Balancer(replica)
    worker = AgentLoopWorker(config, llm_client=LLMServerClient(config, balancer))
    tok = worker.tokenizer
    envs = environments_for(SCRIPTED_ID, {"max_steps": 5, "system_prompt": "Reach the room."})
    rows = [{**row, "agent_name": AGENT_NAME} for row in envs.rows()]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "train.parquet"))
    dataset = RLHFDataset(data_files=[str(tmp_path / "train.parquet")], tokenizer=tok, config=config.data)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))

    out = asyncio.run(worker.generate_sequences(batch))

    n = len(rows)
    assert out.batch["responses"].shape == out.batch["response_mask"].shape == (n, 256)
    assert out.batch["prompts"].shape == (n, 256)
    assert out.batch["rm_scores"].sum(-1).tolist() == [1.0] * n  # the return, on the last response token
    assert [list(a) for a in out.non_tensor_batch["actions"]] == [PLAN] * n
    assert list(out.non_tensor_batch["success"]) == [True] * n
    assert list(out.non_tensor_batch["__num_turns__"]) == [1 + 2 * len(PLAN)] * n
    for i, row in enumerate(rows):
        responses, mask = out.batch["responses"][i], out.batch["response_mask"][i]
        attended = out.batch["attention_mask"][i, 256:]
        # The tokens verl trains on are the policy's actions and nothing the simulator said.
        assert trained_text(tok, responses, mask) == "".join(f"{a}<|im_end|>" for a in PLAN)
        observations = trained_text(tok, responses, attended * (1 - mask))
        assert "You did go[2]." in observations and "You did go[3]." in observations
        prompt = tok.decode(out.batch["prompts"][i][out.batch["attention_mask"][i, :256].bool()])
        assert "Reach the room." in prompt and f"Reach room {row['task_id'][-1]}" in prompt
        logprobs = out.batch["rollout_log_probs"][i]
        assert all(float(lp) == (-0.25 if m else 0.0) for lp, m in zip(logprobs, mask, strict=True))
    # One sticky request id per episode at the balancer, each turn its own id at the replica.
    assert len(balancer.acquired) == n * len(PLAN) and len(set(balancer.acquired)) == n
    assert len({c["request_id"] for c in replica.calls}) == n * len(PLAN)
