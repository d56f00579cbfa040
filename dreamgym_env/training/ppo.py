"""One MaskablePPO recipe for DreamGym's TextWorld ids, simulated or real: the same learner on either.

The env is ``TextEmbedding(DiscreteActions(gymnasium.make(env_id, ...)))``: admissible commands as
``Discrete(K)`` with action masks, the observation and the task as hashed text vectors. A simulated id
trains on ``SB3VecEnv`` (every sub-env's model request in flight at once), a real id on a
``DummyVecEnv`` of wrapped envs. Games are generated locally (``tw-make``) and split into training and
held-out games; a real id plays them, a simulated id starts each episode from a game's real first state
(``tasks_from_games``) and asks the experience model for every transition after that.

The pieces are public so that the examples and the benchmarks share them: :class:`PPOSettings`,
:func:`build_model` (one recipe whatever the env), :func:`continue_training` (sim first, then real),
:func:`make_env`, :func:`make_train_envs`, :func:`evaluate` and :func:`train_and_evaluate`. Needs the
``sb3`` extra (stable-baselines3, sb3-contrib), ``real`` for the real ids and ``plot`` for the figure.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from dreamgym_env.domains.textworld.engine import make_games, tasks_from_games
from dreamgym_env.wrappers import DiscreteActions, TextEmbedding
from dreamgym_env.wrappers.text_embedding import EmbeddedField

__all__ = [
    "FIELDS",
    "PPOSettings",
    "build_model",
    "continue_training",
    "env_kwargs",
    "evaluate",
    "make_env",
    "make_train_envs",
    "train_and_evaluate",
]

#: The observation fields the policy's text embedding reads.
FIELDS: tuple[EmbeddedField, ...] = (
    "observation",
    "task",
)  # what the policy reads, embedded; the same for training and evaluation


@dataclass
class PPOSettings:
    """The learner, the games and the env of one run (the example's command-line flags)."""

    env_id: str = "DreamGym/TextWorld-Real-v0"
    algo: str = "maskable_ppo"  # or "ppo" (no masks: out-of-range indices take the env's failure path)
    challenge: str = "tw-coin_collector"
    level: int = 3
    train_games: int = 8
    eval_games: int = 8
    games_dir: str = "runs/textworld_games"
    max_steps: int = 12
    max_actions: int = 16
    skip_verbs: tuple[str, ...] = ()  # commands not offered to the policy, by first word (DiscreteActions)
    num_envs: int = 4
    total_timesteps: int = 6_000
    n_steps: int = 128
    batch_size: int = 256  # capped at n_steps * num_envs
    n_epochs: int = 10
    learning_rate: float = 1e-3
    ent_coef: float = 0.01
    eval_episodes: int = 48
    seed: int = 0
    out_dir: str = "runs/train_ppo"
    backend: str | None = None  # simulated ids: "scripted", or None for the HTTP backend
    base_url: str | None = None
    model: str | None = None


def _generate_games(args: PPOSettings) -> tuple[list[str], list[str]]:
    """Training and held-out games: disjoint generation seeds, cached on disk between runs."""
    root = Path(args.games_dir) / f"{args.challenge}-level{args.level}"
    return _games(args, root / "train", args.train_games, 1_000), _games(
        args, root / "eval", args.eval_games, 9_000
    )


def _games(args: PPOSettings, folder: Path, n: int, seed: int) -> list[str]:
    paths = [folder / f"{args.challenge}-{seed + i}.z8" for i in range(n)]
    if all(p.is_file() for p in paths):
        return [str(p) for p in paths]
    return make_games(folder, n, seed=seed, challenge=args.challenge, settings={"level": args.level})


def env_kwargs(args: PPOSettings, games: list[str]) -> dict[str, Any]:
    """What ``gymnasium.make`` needs: real ids play the game files, simulated ids start from them."""
    kwargs: dict[str, Any] = {"max_steps": args.max_steps}
    if args.env_id.endswith("-Real-v0"):
        kwargs["game_files"] = games
    else:
        kwargs["tasks"] = tasks_from_games(games)
        kwargs.update(
            {
                k: v
                for k, v in {"backend": args.backend, "base_url": args.base_url, "model": args.model}.items()
                if v
            }
        )
    return kwargs


def make_env(args: PPOSettings, kwargs: dict[str, Any]) -> gym.Env:
    """One env as the policy sees it: commands as ``Discrete(max_actions)`` with masks, text hashed."""
    env = gym.make(args.env_id, **kwargs)
    return TextEmbedding(DiscreteActions(env, args.max_actions, skip_verbs=args.skip_verbs), fields=FIELDS)


def make_train_envs(args: PPOSettings, kwargs: dict[str, Any]) -> Any:
    """The training VecEnv: concurrent ``SB3VecEnv`` for simulated ids, ``DummyVecEnv`` for real ones.

    Both present the same observations and masks as :func:`make_env`; ``VecMonitor`` records the
    episode statistics SB3 logs.
    """
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecMonitor

    if args.env_id.endswith("-Real-v0"):
        return make_vec_env(lambda: make_env(args, kwargs), n_envs=args.num_envs, seed=args.seed)
    from dreamgym_env.integrations.sb3 import SB3VecEnv

    envs = SB3VecEnv.make(
        args.env_id,
        args.num_envs,
        max_actions=args.max_actions,
        fields=FIELDS,
        skip_verbs=args.skip_verbs,
        **kwargs,
    )
    envs.seed(args.seed)
    return VecMonitor(envs)


def evaluate(model: Any, env: gym.Env, episodes: int, seed: int) -> float:
    """Success rate over ``episodes`` episodes; ``model=None`` is the uniform random admissible policy."""
    rng = np.random.default_rng(seed)
    wins = 0
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        done = False
        while not done:
            mask = info["action_mask"]
            if model is None:
                action = int(rng.choice(np.flatnonzero(mask)))
            else:
                kwargs = {"action_masks": mask} if "Maskable" in type(model).__name__ else {}
                action = int(model.predict(obs, deterministic=False, **kwargs)[0])
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        wins += bool(info["success"])
    return wins / episodes


def build_model(args: PPOSettings, vec_env: Any) -> Any:
    """The learner, with the same hyperparameters whatever env it trains on."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    algo = MaskablePPO if args.algo == "maskable_ppo" else PPO
    return algo(
        "MlpPolicy",
        vec_env,
        n_steps=args.n_steps,
        batch_size=min(args.batch_size, args.n_steps * args.num_envs),
        n_epochs=args.n_epochs,
        learning_rate=args.learning_rate,
        ent_coef=args.ent_coef,
        gamma=0.97,
        seed=args.seed,
        verbose=0,
    )


def continue_training(model: Any, vec_env: Any, timesteps: int, callback: Any = None) -> Any:
    """Train ``model`` on another env for ``timesteps`` more steps (sim-to-real: sim first, then real).

    The policy, its optimiser state and the timestep count carry over; the new env must have the
    same spaces and number of envs (``TextEmbedding(DiscreteActions(...))`` with the same
    ``max_actions`` and fields, simulated or real). Every learn call collects whole rollouts of
    ``n_steps * num_envs`` steps.
    """
    model.set_env(vec_env)  # resets the new env before its first rollout
    return model.learn(total_timesteps=timesteps, callback=callback, reset_num_timesteps=False)


def train_and_evaluate(args: PPOSettings) -> dict[str, Any]:
    """Train on ``args.env_id``'s training games, save the policy, evaluate it and a random policy.

    Writes ``policy.zip``, ``result.json`` and ``success_rate.png`` into ``args.out_dir``; returns the
    result (success of the trained and the random policy on the training and held-out games, the
    training time).
    """
    from stable_baselines3.common.callbacks import BaseCallback
    from tqdm.auto import tqdm

    class SuccessTracker(BaseCallback):
        """A progress bar, and the success of every finished training episode."""

        def __init__(self) -> None:
            super().__init__()
            self.history: list[tuple[int, bool]] = []

        def _on_training_start(self) -> None:
            self.bar = tqdm(total=args.total_timesteps, unit="step", desc="training", mininterval=2.0)

        def _on_step(self) -> bool:
            for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
                if done:
                    self.history.append((self.num_timesteps, bool(info["success"])))
            recent = [s for _, s in self.history[-100:]]
            self.bar.set_postfix(
                episodes=len(self.history), success=f"{np.mean(recent) if recent else 0:.2f}"
            )
            self.bar.update(self.training_env.num_envs)
            return True

        def _on_training_end(self) -> None:
            self.bar.close()

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train_games, held_out = _generate_games(args)
    train_kwargs, eval_kwargs = env_kwargs(args, train_games), env_kwargs(args, held_out)
    vec_env = make_train_envs(args, train_kwargs)
    model = build_model(args, vec_env)
    tracker = SuccessTracker()
    started = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps, callback=tracker)
    train_s = time.perf_counter() - started
    model.save(out / "policy.zip")

    eval_seed = 10_000 + args.seed  # episode seeds never used in training
    result: dict[str, Any] = {"env_id": args.env_id, "algo": args.algo, "train_seconds": round(train_s, 1)}
    for split, kwargs in (("train_games", train_kwargs), ("held_out_games", eval_kwargs)):
        eval_env = make_env(args, kwargs)
        result[f"{split}_random"] = evaluate(None, eval_env, args.eval_episodes, eval_seed)
        result[f"{split}_trained"] = evaluate(model, eval_env, args.eval_episodes, eval_seed)
        eval_env.close()
    vec_env.close()
    _plot_success(tracker.history, result, out / "success_rate.png")
    (out / "result.json").write_text(json.dumps({**result, "args": asdict(args)}, indent=2))
    print(json.dumps(result, indent=2))
    return result


def _plot_success(
    history: list[tuple[int, bool]], result: dict[str, Any], path: Path, window: int = 50
) -> None:
    """Success rate of training episodes (moving average) against timesteps, with the held-out figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if history:
        steps = np.array([t for t, _ in history])
        wins = np.array([s for _, s in history], dtype=float)
        kernel = np.ones(min(window, len(wins))) / min(window, len(wins))
        ax.plot(steps[len(kernel) - 1 :], np.convolve(wins, kernel, mode="valid"), label="training episodes")
    ax.axhline(result["held_out_games_random"], color="gray", ls="--", label="random, held-out games")
    ax.axhline(result["held_out_games_trained"], color="green", ls=":", label="trained, held-out games")
    ax.set(
        xlabel="environment steps",
        ylabel="success rate",
        ylim=(0, 1.02),
        title=f"{result['algo']} on {result['env_id']}",
    )
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
