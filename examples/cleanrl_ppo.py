"""CleanRL-style PPO (one file, plain torch) on a DreamGym id, with action masks.

The loop is CleanRL's ``ppo.py`` on a Gymnasium vector env. ``gymnasium.make_vec`` gives the native
vector env, whose sub-envs' model requests go out together each step; ``VectorDiscreteActions`` and
``VectorTextEmbedding`` turn its text into ``MultiDiscrete`` indices over the admissible actions and
embedded observations, and Gymnasium's ``RecordEpisodeStatistics`` reports finished episodes.

The vector env runs in ``SAME_STEP`` autoreset mode, the convention CleanRL's loop was written for:
every step is a real transition, and a step that ends an episode returns the next episode's first
observation with the ended one in ``infos["final_obs"]`` (used here to bootstrap the value of a
truncated episode). Gymnasium 1.x's default ``NEXT_STEP`` would need the loop to skip the reset steps
(``docs/training_rl.md``).

    # the scripted fake model (no server; it checks the plumbing only)
    python examples/cleanrl_ppo.py --backend scripted --total-timesteps 2048
    # a served experience model
    python examples/cleanrl_ppo.py --base-url http://127.0.0.1:8000/v1 --model M
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from torch import nn
from tqdm import tqdm

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.wrappers import VectorDiscreteActions, VectorTextEmbedding


@dataclass
class Args:
    env_id: str = "DreamGym/TextWorld-v0"
    num_envs: int = 8
    num_steps: int = 32  # steps per sub-env per rollout
    total_timesteps: int = 4096
    max_steps: int = 12
    max_actions: int = 16
    learning_rate: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    seed: int = 0
    backend: str | None = None  # "scripted", or None for the HTTP backend
    base_url: str | None = None
    model: str | None = None


def make_envs(args: Args) -> gym.vector.VectorEnv:
    """The vector env the loop trains on (what ``docs/training_rl.md`` shows)."""
    kwargs = {"backend": args.backend, "base_url": args.base_url, "model": args.model}
    envs = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        autoreset_mode=AutoresetMode.SAME_STEP,
        max_steps=args.max_steps,
        **{k: v for k, v in kwargs.items() if v is not None},
    )
    envs = VectorDiscreteActions(envs, max_actions=args.max_actions)
    return RecordEpisodeStatistics(VectorTextEmbedding(envs, fields=("observation", "task")))


class Agent(nn.Module):
    """CleanRL's actor-critic MLP; masked logits keep the policy on admissible actions."""

    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)
        )
        self.actor = nn.Sequential(
            nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_actions)
        )

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def act(
        self, obs: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = self.actor(obs).masked_fill(~mask, -1e9)
        dist = torch.distributions.Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


def main(args: Args) -> dict[str, Any]:
    """Train; returns the episodes' returns and lengths and the number of PPO updates."""
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    envs = make_envs(args)
    n, steps = args.num_envs, args.num_steps
    obs_dim = envs.single_observation_space.shape[0]
    agent = Agent(obs_dim, args.max_actions)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs_buf = torch.zeros((steps, n, obs_dim))
    mask_buf = torch.zeros((steps, n, args.max_actions), dtype=torch.bool)
    actions = torch.zeros((steps, n), dtype=torch.long)
    logprobs, rewards, dones, values = (torch.zeros((steps, n)) for _ in range(4))

    obs_np, infos = envs.reset(seed=int(rng.integers(2**31)))
    obs, mask = torch.as_tensor(obs_np), torch.as_tensor(infos["action_mask"])
    returns: list[float] = []
    lengths: list[int] = []
    updates = args.total_timesteps // (n * steps)
    started = time.perf_counter()
    for _ in tqdm(range(updates), desc="PPO updates"):
        for t in range(steps):
            obs_buf[t], mask_buf[t] = obs, mask
            with torch.no_grad():
                action, logprob, _, value = agent.act(obs, mask)
            actions[t], logprobs[t], values[t] = action, logprob, value
            obs_np, reward, terminations, truncations, infos = envs.step(action.numpy())
            reward = torch.as_tensor(reward, dtype=torch.float32)
            if "final_obs" in infos:  # bootstrap truncated episodes from their real last observation
                for j in np.flatnonzero(infos["_final_obs"] & truncations & ~terminations):
                    with torch.no_grad():
                        final = torch.as_tensor(infos["final_obs"][j])
                        reward[j] += args.gamma * agent.value(final)
            rewards[t] = reward
            dones[t] = torch.as_tensor(np.logical_or(terminations, truncations), dtype=torch.float32)
            if "_episode" in infos:
                returns += infos["episode"]["r"][infos["_episode"]].tolist()
                lengths += infos["episode"]["l"][infos["_episode"]].tolist()
            obs, mask = torch.as_tensor(obs_np), torch.as_tensor(infos["action_mask"])

        with torch.no_grad():  # GAE: dones[t] says the episode ended at step t
            next_value = agent.value(obs)
            advantages = torch.zeros_like(rewards)
            last = torch.zeros(n)
            for t in reversed(range(steps)):
                following = next_value if t == steps - 1 else values[t + 1]
                keep = 1.0 - dones[t]
                delta = rewards[t] + args.gamma * following * keep - values[t]
                advantages[t] = last = delta + args.gamma * args.gae_lambda * keep * last
            targets = advantages + values

        b_obs, b_mask = obs_buf.reshape(-1, obs_dim), mask_buf.reshape(-1, args.max_actions)
        b_actions, b_logprobs = actions.reshape(-1), logprobs.reshape(-1)
        b_adv, b_targets = advantages.reshape(-1), targets.reshape(-1)
        batch = n * steps
        minibatch = max(batch // args.num_minibatches, 1)
        for _ in range(args.update_epochs):
            order = torch.as_tensor(rng.permutation(batch))
            for start in range(0, batch, minibatch):
                idx = order[start : start + minibatch]
                _, logprob, entropy, value = agent.act(b_obs[idx], b_mask[idx], b_actions[idx])
                ratio = (logprob - b_logprobs[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                pg_loss = torch.max(
                    -adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                ).mean()
                v_loss = 0.5 * ((value - b_targets[idx]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
    envs.close()
    elapsed = time.perf_counter() - started
    mean = float(np.mean(returns)) if returns else float("nan")
    print(
        f"{updates} updates, {len(returns)} episodes, mean return {mean:.2f}, {updates * batch / elapsed:.1f} steps/s"
    )
    return {"returns": returns, "lengths": lengths, "updates": updates}


def parse_args() -> Args:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for f in fields(Args):
        kind = {"int": int, "float": float}.get(str(f.type), str)
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    main(parse_args())
