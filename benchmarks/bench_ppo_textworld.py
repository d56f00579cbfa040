"""Does PPO through the SB3 adapters learn on real TextWorld games? Random vs trained success rates.

Trains MaskablePPO with :mod:`dreamgym_env.training.ppo` (``examples/train_ppo.py``'s recipe) on
generated games (``tw-coin_collector``), then
evaluates the trained policy and a uniform random admissible policy over held-out episode seeds, on
the training games and on held-out games (never seen in training), and prints a table.

    python benchmarks/bench_ppo_textworld.py                       # about 5-10 minutes on 2 CPU cores
    python benchmarks/bench_ppo_textworld.py --total-timesteps 3000 --level 2   # quicker
"""

from __future__ import annotations

from dataclasses import fields

from _harness import arg_parser

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.training.ppo import PPOSettings, train_and_evaluate


def main() -> None:
    defaults = PPOSettings(out_dir="runs/bench_ppo_textworld")  # the example's defaults
    parser = arg_parser(__doc__)
    for f in fields(PPOSettings):
        kind = {"int": int, "float": float}.get(str(f.type), str)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=getattr(defaults, f.name))
    args = PPOSettings(**vars(parser.parse_args()))
    result = train_and_evaluate(args)

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
