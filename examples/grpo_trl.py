"""The paper's loop on a CPU: SFT warm start on real expert play, GRPO in the simulator, then the real games.

1. Builds TextWorld games of the package's suite (training and held-out) and fills a replay buffer
   with real expert episodes of the training games (``play_noisy_expert``).
2. Builds a tiny policy language model on the spot (a BPE trained on the episodes, Qwen3's chat
   template as TRL ships it, a small Qwen2 network) and warm-starts it with TRL's ``SFTTrainer``
   (``assistant_only_loss``) on the buffer's expert episodes, written as ``act`` tool calls.
3. Measures its real success on the held-out games.
4. Trains it with TRL's ``GRPOTrainer`` through :mod:`dreamgym_env.integrations.trl` against
   ``DreamGym/TextWorld-v0``: the shipped TextWorld experience model served by vLLM (``--experience
   smoke`` uses the smoke model, ``scripted`` the scripted backend: plumbing only), with the
   curriculum choosing the tasks of the training games.
5. Measures real success on the held-out games again.

    python examples/grpo_trl.py                      # a small run (CPU, 4-10 minutes on two cores)
    python examples/grpo_trl.py --sft-steps 20 --grpo-steps 1 --eval-episodes 2 --experience scripted

Everything is seeded; the figures are a tiny model's, meant to show the loop works end to end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.integrations.trl import DreamGymEnvironments, DreamGymToolEnv
from dreamgym_env.real.textworld import play_noisy_expert, tasks_from_games
from dreamgym_env.real.textworld_suite import build_suite
from dreamgym_env.training.collector import default_observation_message


@dataclass
class Args:
    out_dir: str = "runs/grpo_trl"
    train_games: int = 8
    heldout_games: int = 2
    # Real episodes per training game: the first is the expert's (the SFT data), the rest noisy.
    expert_episodes: int = 1
    max_steps: int = 6
    hidden_size: int = 64
    layers: int = 2
    sft_steps: int = 250
    grpo_steps: int = 2
    num_generations: int = 2
    max_completion_length: int = 256
    eval_episodes: int = 4
    temperature: float = 1.0
    experience: str = "shipped"  # shipped | smoke | scripted
    seed: int = 0


def expert_chats(buffer: ReplayBuffer, system: str) -> list[list[dict[str, Any]]]:
    """The buffer's expert episodes as chats: first observation, then ``act`` calls and their answers."""
    episodes: dict[str, list[Any]] = {}
    for t in buffer.iter_transitions():
        if t.metadata.get("policy") == "expert" and t.source == "real":
            episodes.setdefault(t.episode_id, []).append(t)
    chats = []
    for steps in episodes.values():
        steps.sort(key=lambda t: t.step)
        first = steps[0]
        info = {"task": first.task, "admissible_actions": first.metadata.get("prev_admissible_actions", [])}
        chat: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": default_observation_message(first.state, info, True)},
        ]
        for t in steps:
            call = {"type": "function", "function": {"name": "act", "arguments": {"action": t.action}}}
            chat.append({"role": "assistant", "content": "", "tool_calls": [call]})
            if t is not steps[-1]:
                after = {"admissible_actions": t.metadata.get("admissible_actions", [])}
                chat.append(
                    {
                        "role": "tool",
                        "name": "act",
                        "content": default_observation_message(t.next_state, after, False),
                    }
                )
        chats.append(chat)
    return chats


def build_policy(chats: list[list[dict[str, Any]]], tools: list[Any], args: Args) -> tuple[Any, Any]:
    """A tokenizer trained on the chats (Qwen3's training template from TRL) and a small Qwen2 model."""
    import tokenizers
    import torch
    import transformers
    from trl.chat_template_utils import add_response_schema, get_training_chat_template, qwen3_chat_template

    from dreamgym_env.serving.hf_model import causal_lm, train_bpe_tokenizer

    probe = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer(tokenizers.models.BPE()), eos_token="<|im_end|>"
    )
    probe.chat_template = qwen3_chat_template
    texts = [probe.apply_chat_template(c, tools=tools, tokenize=False) for c in chats]
    call = probe.apply_chat_template(chats[0][:3], tools=tools, tokenize=False).split(
        "<|im_start|>assistant\n"
    )[-1]
    opening, closing = call.split(chats[0][2]["tool_calls"][0]["function"]["arguments"]["action"])[0:2]
    closing = closing.split("<|im_end|>")[0]
    tok = train_bpe_tokenizer(
        transformers,
        tokenizers,
        texts,
        vocab_size=2000,
        model_max_length=8192,
        added_tokens=[
            opening.split("</think>\n\n")[-1],
            closing,
            "<tool_call>",
            "</tool_call>",
            "<think>",
            "</think>",
            "<tool_response>",
            "</tool_response>",
        ],
    )
    tok.chat_template = qwen3_chat_template
    add_response_schema(tok)  # parse tool calls as Qwen3's format
    tok.chat_template = get_training_chat_template(tok)  # prefix-preserving, with generation markers
    tok.padding_side = "left"
    torch.manual_seed(args.seed)
    model = causal_lm(
        transformers,
        tok,
        arch="qwen2",
        hidden_size=args.hidden_size,
        intermediate_size=2 * args.hidden_size,
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden_size // 32,
        num_key_value_heads=args.hidden_size // 32,
        max_position_embeddings=8192,
    )
    return model, tok


def sft(
    model: Any, tok: Any, chats: list[list[dict[str, Any]]], tools: list[Any], args: Args, out: Path
) -> float:
    """TRL's SFT on the expert chats, the loss on the assistant's tool calls only.

    The chats are tokenised here with the assistant mask (the same rendering GRPO and the evaluation
    use); TRL's collator puts labels where the mask is 1.
    """
    import datasets
    import trl

    rows = []
    for chat in chats:
        ids = tok.apply_chat_template(
            chat, tools=tools, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        rows.append({"input_ids": ids["input_ids"], "assistant_masks": ids["assistant_masks"]})
    config = trl.SFTConfig(
        output_dir=str(out / "sft"),
        max_steps=args.sft_steps,
        per_device_train_batch_size=2,
        learning_rate=3e-3,
        max_length=8192,
        logging_steps=max(1, args.sft_steps // 5),
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=args.seed,
    )
    trainer = trl.SFTTrainer(
        model=model, args=config, train_dataset=datasets.Dataset.from_list(rows), processing_class=tok
    )
    return float(trainer.train().training_loss)


def real_success(model: Any, tok: Any, envs: DreamGymEnvironments, episodes: int, args: Args) -> float:
    """Success over ``episodes`` episodes of the held-out real games, the policy sampling its calls."""
    import torch
    from trl.chat_template_utils import parse_response

    rows = envs.rows()
    wins = 0
    torch.manual_seed(args.seed)
    for k in range(episodes):
        env = envs()
        row = rows[k % len(rows)]
        messages = [dict(m) for m in row["prompt"]]
        messages[-1]["content"] = env.reset(**row)
        for _ in range(args.max_steps):
            ids = tok.apply_chat_template(
                messages, tools=[env.act], add_generation_prompt=True, tokenize=True, return_dict=False
            )
            with torch.no_grad():
                generated = model.generate(
                    torch.tensor([ids]),
                    max_new_tokens=32,
                    do_sample=True,
                    temperature=args.temperature,
                    pad_token_id=tok.pad_token_id,
                    eos_token_id=tok.eos_token_id,
                )[0][len(ids) :].tolist()
            reply = parse_response(tok, generated, prefix=ids, tools=[env.act])
            calls = reply.get("tool_calls") or []
            if not calls:
                break
            answer = env.act(str(calls[0]["function"]["arguments"].get("action", "")))
            messages += [reply, {"role": "tool", "name": "act", "content": answer}]
            if env.done:
                break
        wins += bool(env.episode is not None and env.episode.success)
        env._close()
    return wins / episodes


@contextlib.contextmanager
def experience_model(args: Args, out: Path) -> Any:
    """Keyword arguments for the simulated env: a served model, or the scripted backend."""
    if args.experience == "scripted":
        yield {"backend": "scripted"}
        return
    from dreamgym_env.serving import serve_smoke_model
    from dreamgym_env.serving.shipped import recommended_env_kwargs, serve_shipped_model

    if args.experience == "shipped":
        server = serve_shipped_model("textworld", log_path=out / "vllm.log")
        extra = recommended_env_kwargs("textworld")
    else:
        server = serve_smoke_model(log_path=out / "vllm.log")
        extra = {}
    with server:
        yield {"base_url": server.base_url, "model": server.model, **extra, "on_invalid_output": "fail_state"}


def main(args: Args) -> None:
    import trl

    from dreamgym_env.curriculum import CurriculumSampler

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    started = time.monotonic()
    out = Path(args.out_dir)
    suite = build_suite(
        out / "suite", train_games=args.train_games, heldout_games=args.heldout_games, seed=args.seed
    )
    train, heldout = suite.paths("train"), suite.paths("heldout")
    with ReplayBuffer.open(out / "offline.sqlite", dedup="episode") as buffer:
        if len(buffer) == 0:
            for i, game in enumerate(train):
                buffer.add_many(play_noisy_expert(game, args.expert_episodes, seed=args.seed + i))
        real = DreamGymEnvironments(
            "DreamGym/TextWorld-Real-v0",
            tasks=tasks_from_games(heldout),
            game_files=heldout,
            max_steps=args.max_steps,
        )
        chats = expert_chats(buffer, real.system_prompt)
    tools = [DreamGymToolEnv.act]
    print(f"{len(train)} training games, {len(chats)} expert episodes for SFT, {len(heldout)} held-out games")

    model, tok = build_policy(chats, tools, args)
    loss = sft(model, tok, chats, tools, args, out)
    before = real_success(model, tok, real, args.eval_episodes, args)
    print(f"SFT: {args.sft_steps} steps, loss {loss:.3f}; real held-out success {before:.2f}")

    with experience_model(args, out) as sim_kwargs:
        curriculum = CurriculumSampler(str(out / "tasks.sqlite"), "textworld", seeds=tasks_from_games(train))
        sim = DreamGymEnvironments(
            "DreamGym/TextWorld-v0",
            tasks=curriculum,
            max_steps=args.max_steps,
            system_prompt=real.system_prompt,
            **sim_kwargs,
        )
        config = trl.GRPOConfig(
            output_dir=str(out / "grpo"),
            max_steps=args.grpo_steps,
            per_device_train_batch_size=args.num_generations,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            max_tool_calling_iterations=args.max_steps,
            temperature=args.temperature,
            learning_rate=1e-4,
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            save_strategy="no",
            seed=args.seed,
        )
        sim.check_completion_budget(tok, args.max_completion_length)  # TRL would drop overlong tool results
        trainer = trl.GRPOTrainer(
            model=model,
            args=config,
            train_dataset=sim.dataset(),
            processing_class=tok,
            environment_factory=sim,
        )
        trainer.train()
        rewards = [
            log["rewards/DreamGymToolEnv/mean"]
            for log in trainer.state.log_history
            if "rewards/DreamGymToolEnv/mean" in log
        ]
        print(
            f"GRPO: {args.grpo_steps} steps in the simulator ({len(sim.episodes)} finished episodes), mean reward per step {np.round(rewards, 2).tolist()}"
        )
    after = real_success(model, tok, real, args.eval_episodes, args)
    real.close()
    summary = {
        "real_success_before": before,
        "real_success_after": after,
        "args": vars(args),
        "seconds": round(time.monotonic() - started),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"real held-out success: before GRPO {before:.2f}, after {after:.2f} ({summary['seconds']} s)")


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for f in fields(Args):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    main(parse_args())
