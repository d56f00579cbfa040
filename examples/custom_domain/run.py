"""Train a tiny agent on a domain defined only by a spec file, record the run, then replay it exactly.

    python examples/custom_domain/run.py --scripted                  # no server: the scripted fake model
    python examples/custom_domain/run.py --base-url http://127.0.0.1:8000/v1 --model dreamgym-smoke

The agent is a bandit over three handling plans per task (epsilon-greedy on the episode reward): small
enough to read in a minute, and a real learning loop against the simulated environment. The second
phase replays the recording with no live backend and checks every observation, reward and info.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np

import dreamgym_env
from dreamgym_env.experience.backends.openai_http import OpenAIBackend

SPEC = Path(__file__).with_name("support_desk.yaml")
PLANS = {
    "billing": [
        "view_account",
        "assign[billing]",
        "reply[We checked your account and fixed the charge.]",
        "close[resolved]",
    ],
    "technical": [
        "set_priority[urgent]",
        "assign[technical]",
        "reply[Our engineers are on it.]",
        "close[resolved]",
    ],
    "spam": ["close[spam]"],
}


@dataclasses.dataclass
class Args:
    episodes: int = 12
    epsilon: float = 0.3
    seed: int = 0
    recording: str = "support_desk_run.sqlite"
    scripted: bool = False
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "dreamgym-smoke"


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for field in dataclasses.fields(Args):
        if field.type == "bool":
            parser.add_argument(f"--{field.name.replace('_', '-')}", action="store_true")
        else:
            parser.add_argument(
                f"--{field.name.replace('_', '-')}", type=type(field.default), default=field.default
            )
    return Args(**vars(parser.parse_args()))


def run(env_id: str, backend: dreamgym_env.Backend, args: Args) -> list[tuple]:
    """Train the bandit for ``args.episodes`` episodes; return everything the env reported."""
    env = gym.make(env_id, backend=backend, temperature=0.0, max_state_chars=600)
    rng = np.random.default_rng(args.seed)
    value = {}  # (task_id, plan) -> mean reward so far
    count = {}
    trace = []
    for episode in range(args.episodes):
        obs, info = env.reset(seed=args.seed + episode)
        task = info["task_id"]
        if rng.random() < args.epsilon:
            plan = list(PLANS)[int(rng.integers(len(PLANS)))]
        else:
            plan = max(PLANS, key=lambda p: value.get((task, p), 0.5))
        total = 0.0
        trace.append((obs, {k: v for k, v in info.items() if k != "timing"}))
        for action in PLANS[plan]:
            obs, reward, terminated, truncated, info = env.step(action)
            trace.append(
                (obs, reward, terminated, truncated, {k: v for k, v in info.items() if k != "timing"})
            )
            total += reward
            if terminated or truncated:
                break
        n = count[(task, plan)] = count.get((task, plan), 0) + 1
        value[(task, plan)] = value.get((task, plan), 0.5) + (total - value.get((task, plan), 0.5)) / n
        print(f"episode {episode:2d} {task:<22} plan {plan:<9} reward {total:.0f}")
    env.close()
    return trace


def main() -> None:
    args = parse_args()
    env_id = dreamgym_env.register_domain(SPEC)
    if args.scripted:
        live: dreamgym_env.Backend = dreamgym_env.ScriptedBackend()
    else:
        live = OpenAIBackend(
            dreamgym_env.BackendConfig(base_url=args.base_url, model=args.model, temperature=0.0)
        )
    Path(args.recording).unlink(missing_ok=True)
    print(f"training on {env_id}, recording to {args.recording}")
    recorded = run(env_id, dreamgym_env.record(live, args.recording), args)
    print("replaying from the recording, with no live backend")
    replayed = run(env_id, dreamgym_env.replay(args.recording), args)
    assert replayed == recorded, "the replay differs from the recorded run"
    print(f"replay identical: {len(recorded)} observations, rewards and infos")


if __name__ == "__main__":
    main()
