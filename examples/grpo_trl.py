"""GRPO in the dream moves real success: a pretrained LLM policy, TRL's GRPOTrainer, real TextWorld games.

1. Makes TextWorld coin-collector games (levels 2 and 3: walk where the task says, take the coin),
   training and held-out, from disjoint seeds.
2. Builds the policy: SmolLM2-135M-Instruct from its PyPI wheel with LoRA
   (:func:`dreamgym_env.training.policy.pretrained_tool_policy`), and warm-starts it on the *format*
   only: TRL's SFT on real episodes whose actions were drawn at random among the admissible ones,
   written as ``act`` tool calls (loss on the calls). It learns to call the tool, not which action wins.
3. Measures its success in the **real** games (held-out and training), ``--eval-episodes`` episodes
   each, once per seed, served by vLLM (:func:`~dreamgym_env.training.policy.play_tool_policy`).
4. For each seed: TRL's ``GRPOTrainer`` with the package's ``environment_factory``
   (:mod:`dreamgym_env.integrations.trl`) against ``DreamGym/TextWorld-v0``, the shipped TextWorld
   experience model served by vLLM, the curriculum choosing the training games' tasks; then the real
   games again.
5. Writes ``summary_sim.json`` (and, with ``--results``, the figures as ``docs/results/grpo.json``).

``--world real`` runs step 4 in the real games instead (the paper's real-environment baseline, same
budget and curriculum), its stages under ``seedN/real_world/``.

Each stage writes its result under ``--out-dir`` and is skipped when it is there, so a run stopped
between stages resumes where it was.

    python examples/grpo_trl.py --results docs/results/grpo.json   # 3 seeds: about 2.2 h on two CPU cores
    python examples/grpo_trl.py --seeds 0 --grpo-steps 2 --eval-episodes 8 --experience scripted
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.curriculum import CurriculumSampler
from dreamgym_env.integrations.trl import DreamGymEnvironments, DreamGymToolEnv
from dreamgym_env.real.textworld import make_games, tasks_from_games

SYSTEM_PROMPT = (
    "You are an agent in a text game. Each turn, call the act tool with exactly one of the admissible "
    "actions. Do what the task says, in its order."
)


@dataclass
class Args:
    out_dir: str = "runs/grpo_trl"
    levels: str = "2,3"  # tw-coin_collector levels, games alternate between them
    train_games: int = 32
    heldout_games: int = 16
    max_steps: int = 6
    warmup_episodes: int = 2  # random-action real episodes per training game, for the format warm start
    sft_steps: int = 40
    sft_lr: float = 5e-4
    grpo_steps: int = 4  # 4 steps already moved real success in a 16-step run (docs/training_rl.md)
    num_generations: int = 4
    batch_size: int = 8
    learning_rate: float = 2e-4  # constant: a short run gains nothing from a decay to zero
    max_completion_length: int = 1024
    temperature: float = 0.7
    eval_episodes: int = 100
    save_steps: int = 2  # GRPO checkpoints (adapter and optimizer), so a stopped run resumes
    evaluate_checkpoint: str = (
        ""  # only measure this saved adapter (e.g. a GRPO checkpoint) in the real games
    )
    seeds: str = "0,1,2"
    world: str = "sim"  # sim: GRPO in the simulator | real: in the real games (the paper's baseline)
    experience: str = "shipped"  # shipped | scripted (plumbing only)
    results: str = ""  # also write the before/after figures here (docs/results/grpo.json)


def games(args: Args, out: Path) -> tuple[list[str], list[str]]:
    """Training games from seeds 100,000 on, held-out ones from 1,100,000 on, levels alternating."""
    levels = [int(x) for x in args.levels.split(",")]

    def split(n: int, first_seed: int, name: str) -> list[str]:
        paths = []
        for i in range(n):
            level = levels[i % len(levels)]
            folder = out / "games" / name / f"level{level}"
            target = folder / f"tw-coin_collector-{first_seed + i}.z8"
            if not target.exists():
                make_games(
                    folder, 1, seed=first_seed + i, challenge="tw-coin_collector", settings={"level": level}
                )
            paths.append(str(target))
        return paths

    return split(args.train_games, 100_000, "train"), split(args.heldout_games, 1_100_000, "heldout")


def real_envs(game_files: list[str], args: Args) -> DreamGymEnvironments:
    return DreamGymEnvironments(
        "DreamGym/TextWorld-Real-v0",
        tasks=tasks_from_games(game_files),
        game_files=game_files,
        max_steps=args.max_steps,
        system_prompt=SYSTEM_PROMPT,
    )


def warmup_chats(envs: DreamGymEnvironments, episodes: int, seed: int) -> list[list[dict[str, Any]]]:
    """Real episodes of random admissible actions, as the tool-call chats GRPO's rollouts are."""
    rng = random.Random(seed)
    chats = []
    env = envs()
    for row in envs.rows(repeats=episodes):
        chat = [dict(m) for m in row["prompt"]]
        chat[-1]["content"] += env.reset(**row)
        while not env.done and len(env.episode.actions) < envs.env_kwargs["max_steps"]:
            action = rng.choice(env.info["admissible_actions"])
            call = {"type": "function", "function": {"name": "act", "arguments": {"action": action}}}
            chat += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "name": "act", "content": env.act(action)},
            ]
        chats.append(chat)
    env._close()
    return chats


def sft(model: Any, tok: Any, chats: list[list[dict[str, Any]]], args: Args, out: Path) -> float:
    """TRL's SFT on the chats, the loss on the assistant's tool calls only (the assistant mask)."""
    import datasets
    import trl

    rows = []
    for chat in chats:
        ids = tok.apply_chat_template(
            chat,
            tools=[DreamGymToolEnv.act],
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        rows.append({"input_ids": ids["input_ids"], "assistant_masks": ids["assistant_masks"]})
    config = trl.SFTConfig(
        output_dir=str(out / "sft"),
        max_steps=args.sft_steps,
        per_device_train_batch_size=4,
        learning_rate=args.sft_lr,
        max_length=4096,
        gradient_checkpointing=False,  # on a CPU it only trades time for memory there is enough of
        logging_steps=5,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=0,
    )
    trainer = trl.SFTTrainer(
        model=model, args=config, train_dataset=datasets.Dataset.from_list(rows), processing_class=tok
    )
    return float(trainer.train().training_loss)


def evaluate(
    model: Any, tok: Any, splits: dict[str, DreamGymEnvironments], args: Args, seed: int, out: Path
) -> dict[str, Any]:
    """Real success on each split with the policy served by vLLM (a merged copy of ``model``)."""
    from dreamgym_env.serving import VLLMServer
    from dreamgym_env.training.policy import play_tool_policy, save_merged, served_policy

    folder = save_merged(model, tok, out / "merged")
    result: dict[str, Any] = {}
    with VLLMServer(
        folder,
        served_model_name="policy",
        max_model_len=4096,
        extra_args=["--seed", str(seed)],
        log_path=out / "policy_vllm.log",
    ) as server:
        policy = served_policy(server.base_url, "policy", temperature=args.temperature)
        for name, envs in splits.items():
            rows = envs.rows()
            rows = [rows[i % len(rows)] for i in range(max(args.eval_episodes, len(rows)))]
            started = time.monotonic()
            played = play_tool_policy(
                envs,
                rows,
                tok,
                policy,
                max_turns=args.max_steps,
                seed=seed,
            )
            result[name] = {
                "success": sum(p.success for p in played) / len(played),
                "episodes": len(played),
                "called_tool": sum(p.called_tool for p in played) / len(played),
                "seconds": round(time.monotonic() - started, 1),
            }
            print(f"  {name}: success {result[name]['success']:.3f} over {len(played)} real episodes")
    return result


def grpo(model: Any, tok: Any, train: list[str], args: Args, seed: int, out: Path) -> dict[str, Any]:
    """TRL's GRPOTrainer in the simulator (or the real games), the curriculum choosing the training games' tasks."""
    import trl

    from dreamgym_env.serving.shipped import recommended_env_kwargs, serve_shipped_model

    server = None
    env_id = "DreamGym/TextWorld-v0"
    world_kwargs: dict[str, Any]
    if args.world == "real":
        env_id, world_kwargs = "DreamGym/TextWorld-Real-v0", {"game_files": train}
    elif args.experience == "scripted":
        world_kwargs = {"backend": "scripted"}
    else:
        server = serve_shipped_model("textworld", log_path=out / "experience_vllm.log").__enter__()
        world_kwargs = {
            "base_url": server.base_url,
            "model": "textworld",
            **recommended_env_kwargs("textworld"),
        }
    try:
        curriculum = CurriculumSampler(str(out / "tasks.sqlite"), "textworld", seeds=tasks_from_games(train))
        envs = DreamGymEnvironments(
            env_id,
            tasks=curriculum,
            max_steps=args.max_steps,
            system_prompt=SYSTEM_PROMPT,
            seed=seed,
            **world_kwargs,
        )
        envs.check_completion_budget(tok, args.max_completion_length, turns=args.max_steps)
        config = trl.GRPOConfig(
            output_dir=str(out / "grpo"),
            max_steps=args.grpo_steps,
            per_device_train_batch_size=args.batch_size,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            max_tool_calling_iterations=args.max_steps,
            temperature=args.temperature,
            learning_rate=args.learning_rate,
            lr_scheduler_type="constant",
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            save_strategy="steps",  # a stopped run resumes from its last checkpoint
            save_steps=args.save_steps,
            save_total_limit=1,
            seed=seed,
        )
        trainer = trl.GRPOTrainer(
            model=model,
            args=config,
            train_dataset=envs.dataset(),
            processing_class=tok,
            environment_factory=envs,
        )
        started = time.monotonic()
        checkpoints = sorted((out / "grpo").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        trainer.train(resume_from_checkpoint=str(checkpoints[-1]) if checkpoints else None)
        rewards = [
            log["rewards/DreamGymToolEnv/mean"]
            for log in trainer.state.log_history
            if "rewards/DreamGymToolEnv/mean" in log
        ]
        envs.close()
        return {
            "seconds": round(time.monotonic() - started),
            "reward_per_step": [round(r, 3) for r in rewards],
            "sim_episodes": len(envs.episodes),
        }
    finally:
        if server is not None:
            server.__exit__(None, None, None)


def _stage(path: Path, make: Any) -> Any:
    """The stage's saved result, or ``make()``'s, saved."""
    if path.exists():
        return json.loads(path.read_text())
    result = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    return result


def main(args: Args) -> None:
    import torch

    from dreamgym_env.training.policy import pretrained_tool_policy

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if args.world not in ("sim", "real") or args.experience not in ("shipped", "scripted"):
        raise SystemExit(
            f"--world takes sim or real, --experience shipped or scripted; got {args.world!r}, {args.experience!r}"
        )
    started = time.monotonic()
    out = Path(args.out_dir)
    seeds = [int(s) for s in args.seeds.split(",")]
    train, heldout = games(args, out)
    splits = {"heldout": real_envs(heldout, args), "train": real_envs(train, args)}
    print(f"{len(train)} training and {len(heldout)} held-out coin-collector games (levels {args.levels})")
    if args.evaluate_checkpoint:
        model, tok = pretrained_tool_policy(adapter=args.evaluate_checkpoint)
        folder = Path(args.evaluate_checkpoint)
        result = evaluate(model, tok, splits, args, seeds[0], folder)
        (folder / "real_success.json").write_text(json.dumps(result, indent=1))
        return

    warm = out / "warm_start"
    if (warm / "adapter_config.json").exists():
        model, tok = pretrained_tool_policy(adapter=warm)
    else:
        model, tok = pretrained_tool_policy(seed=0)
        t0 = time.monotonic()
        chats = warmup_chats(splits["train"], args.warmup_episodes, seed=0)
        loss = sft(model, tok, chats, args, out)
        model.save_pretrained(warm)
        (out / "warm_start.json").write_text(
            json.dumps({"loss": loss, "chats": len(chats), "seconds": round(time.monotonic() - t0)})
        )
    before = {
        s: _stage(
            out / f"seed{s}" / "before.json",
            lambda s=s: evaluate(model, tok, splits, args, s, out / f"seed{s}"),
        )
        for s in seeds
    }

    after, training = {}, {}
    for s in seeds:
        # GRPO in the real games keeps its stages apart from the simulator's.
        folder = out / f"seed{s}" if args.world == "sim" else out / f"seed{s}" / "real_world"

        def run(s: int = s, folder: Path = folder) -> dict[str, Any]:
            folder.mkdir(parents=True, exist_ok=True)
            torch.manual_seed(s)
            policy, _ = pretrained_tool_policy(adapter=warm)
            record = grpo(policy, tok, train, args, s, folder)
            return {"training": record, "real": evaluate(policy, tok, splits, args, s, folder)}

        done = _stage(folder / "after.json", run)
        after[s], training[s] = done["real"], done["training"]

    def table(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
        def row(split: str) -> dict[str, Any]:
            values = [runs[s][split]["success"] for s in seeds]
            return {
                "mean": statistics.mean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,  # sample std, across seeds
                "seeds": {str(s): v for s, v in zip(seeds, values, strict=True)},
                "episodes": runs[seeds[0]][split]["episodes"],
            }

        return {split: row(split) for split in ("heldout", "train")}

    summary = {
        "before": table(before),
        "after": table(after),
        "training": {str(s): training[s] for s in seeds},
        "args": asdict(args),
        "seconds": round(time.monotonic() - started),
    }
    (out / f"summary_{args.world}.json").write_text(json.dumps(summary, indent=1))
    if args.results:
        Path(args.results).write_text(json.dumps(summary, indent=1) + "\n")
    for split in ("heldout", "train"):
        b, a = summary["before"][split], summary["after"][split]
        print(
            f"real {split} success: before GRPO {b['mean']:.3f} ± {b['std']:.3f}, after {a['mean']:.3f} ± {a['std']:.3f}"
        )


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for f in fields(Args):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    main(parse_args())
