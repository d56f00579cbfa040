"""Does PPO through the SB3 adapters learn on real TextWorld games? Random vs trained success rates.

Trains MaskablePPO with ``examples/train_ppo.py`` on generated games (``tw-coin_collector``), then
evaluates the trained policy and a uniform random admissible policy over held-out episode seeds, on
the training games and on held-out games (never seen in training), and prints a table.

    python benchmarks/bench_ppo_textworld.py                       # about 5-10 minutes on 2 CPU cores
    python benchmarks/bench_ppo_textworld.py --total-timesteps 3000 --level 2   # quicker
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import fields
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_ppo.py"


def load_example():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("train_ppo", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_ppo"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    train_ppo = load_example()
    defaults = train_ppo.Args(out_dir="runs/bench_ppo_textworld")  # the example's defaults
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for f in fields(train_ppo.Args):
        kind = {"int": int, "float": float}.get(str(f.type), str)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=getattr(defaults, f.name))
    args = train_ppo.Args(**vars(parser.parse_args()))
    result = train_ppo.main(args)

    print(
        f"\n{args.algo} on {args.env_id} ({args.challenge} level {args.level}, max {args.max_steps} steps, "
        f"{args.total_timesteps} timesteps in {result['train_seconds']:.0f} s, "
        f"{args.eval_episodes} episodes each)"
    )
    print("| games | random | trained |")
    print("|---|---|---|")
    for split, name in (
        ("train_games", f"training ({args.train_games})"),
        ("held_out_games", f"held-out ({args.eval_games})"),
    ):
        print(f"| {name} | {result[f'{split}_random']:.2f} | {result[f'{split}_trained']:.2f} |")
    print(f"\nplot: {args.out_dir}/success_rate.png")


if __name__ == "__main__":
    main()
