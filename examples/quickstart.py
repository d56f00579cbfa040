"""Quickstart: an agent loop over a DreamGym env served by vLLM.

With a real experience model (GPU):
    vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000
    python examples/quickstart.py --env-id DreamGym/WebShop-v0 \
        --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-7B-Instruct

Without a GPU, ``--smoke`` builds a tiny model locally, serves it with vLLM's CPU build and plays
against it: it exercises every moving part, but its transitions are not meaningful.

The policy here is an LLM too, reached through the same kind of endpoint, constrained by vLLM's
structured outputs to pick one of the admissible actions (or to follow the domain's action grammar
where the domain does not list actions). Swap in your own policy: it only maps (observation, info) to
an action string.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from dataclasses import dataclass

import gymnasium as gym
import openai

import dreamgym_env


@dataclass
class Args:
    env_id: str = "DreamGym/WebShop-v0"
    episodes: int = 3
    seed: int = 0
    base_url: str | None = None
    model: str | None = None
    smoke: bool = False
    max_steps: int | None = None


class LLMPolicy:
    """Asks a chat model for the next action, constrained to what the env accepts."""

    def __init__(self, base_url: str, model: str, domain: dreamgym_env.Domain) -> None:
        self.client = openai.OpenAI(base_url=base_url, api_key="EMPTY", timeout=60.0)
        self.model = model
        self.domain = domain

    def __call__(self, observation: str, info: dict) -> str:
        actions = list(info["admissible_actions"])
        constraint = {"choice": actions} if actions else {"regex": "|".join(self.domain.action_patterns)}
        response = self.client.chat.completions.create(
            model=self.model,
            messages=[
                {"role": "system", "content": f"You are an agent. {self.domain.action_help}"},
                {"role": "user", "content": f"Task: {info['task']}\n\n{observation}\n\nNext action:"},
            ],
            max_tokens=48,
            temperature=1.0,
            extra_body={"structured_outputs": constraint},
        )
        return (response.choices[0].message.content or "").strip()


def main(args: Args) -> None:
    with contextlib.ExitStack() as stack:
        base_url, model = args.base_url, args.model
        if args.smoke:
            from dreamgym_env.serving import serve_smoke_model

            print("Building/serving the SMOKE MODEL: a tiny model trained here in under a minute.")
            print("It checks the plumbing end to end; its simulated worlds are not meaningful.\n")
            server = stack.enter_context(serve_smoke_model())
            base_url, model = server.base_url, server.model
            print(f"vLLM server up at {base_url} in {server.startup_seconds:.1f}s\n")
        kwargs = {
            k: v for k, v in {"base_url": base_url, "model": model, "max_steps": args.max_steps}.items() if v
        }
        if args.smoke:
            kwargs["on_invalid_output"] = "fail_state"  # a smoke model may ramble; keep the demo going
        env = gym.make(args.env_id, **kwargs)
        stack.callback(env.close)
        domain = env.unwrapped.domain
        policy = LLMPolicy(
            env.unwrapped.backend.config.base_url[0], env.unwrapped.backend.config.model, domain
        )

        step_latencies: list[float] = []
        successes = 0
        for episode in range(args.episodes):
            obs, info = env.reset(seed=args.seed + episode)
            print(f"=== episode {episode}: {info['task']}")
            terminated = truncated = False
            while not (terminated or truncated):
                action = policy(obs, info)
                start = time.perf_counter()
                obs, reward, terminated, truncated, info = env.step(action)
                step_latencies.append(time.perf_counter() - start)
                first_line = obs.splitlines()[0] if obs else ""
                print(f"  step {info['step']:>2}  {action!r:40.40}  -> {first_line[:60]!r}  r={reward}")
            successes += int(info["success"])
            print(f"  ended: {'terminated' if terminated else 'truncated'}, success={info['success']}\n")

        print(
            f"{args.episodes} episodes, {len(step_latencies)} steps, success rate {successes / args.episodes:.2f}, "
            f"median step latency {statistics.median(step_latencies) * 1000:.0f} ms"
        )


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = Args()
    parser.add_argument("--env-id", default=defaults.env_id)
    parser.add_argument("--episodes", type=int, default=defaults.episodes)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--base-url", default=None, help="Experience model endpoint (or DREAMGYM_BASE_URL).")
    parser.add_argument("--model", default=None, help="Served model name (or DREAMGYM_MODEL).")
    parser.add_argument("--smoke", action="store_true", help="Build and serve the tiny local smoke model.")
    parser.add_argument("--max-steps", type=int, default=None)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    main(parse_args())
