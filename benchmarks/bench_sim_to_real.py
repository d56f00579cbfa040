"""Sim-to-real on TextWorld (the paper's Table 1): the same policy trained on real and on simulated steps.

Every arm trains MaskablePPO through ``TextEmbedding(DiscreteActions(...))`` with
``dreamgym_env.training.ppo``'s functions (one model recipe, the same ``--n-steps``, ``--num-envs``,
``--batch-size`` and ``--n-epochs`` everywhere), then plays the policy in the **real** games of a
:mod:`~dreamgym_env.real.textworld_suite` suite:

============  =============================================================================
arm           training
============  =============================================================================
random        none: a uniform random admissible command
real-only     B real steps on the suite's first ``--train-games`` training games
real-10%      B/10 real steps
sim-only      B simulated steps (``DreamGym/TextWorld-v0`` from those games' real first states),
              0 real steps; the offline data (``--buffer``, retrieval) is counted separately
s2r           the sim-only policy, then B/10 real steps (``model.set_env`` + ``learn``)
============  =============================================================================

Success is measured on real training games (new episode seeds) and on the first ``--heldout-games``
held-out games, ``--eval-episodes`` episodes each with seeds no training run uses, for every seed of
``--seeds``. Simulated rollouts run on ``SB3VecEnv``: the ``--num-envs`` experience-model requests of a
step are in flight at once. When ``sim-only`` and ``s2r`` run in one call, s2r continues from the
sim-only policy of the same seed (its sim phase is trained once); alone, s2r trains its own.

Each arm writes ``<out dir>/arms/<arm>.json`` (per-seed results; a later run of the same arm with the
same settings adds or replaces seeds), and the table is rebuilt from every arm file there, so slow arms
can run separately:

    # real arms (B = 51,200 real steps = 100 rollouts of 16 envs x 32 steps)
    python benchmarks/bench_sim_to_real.py --suite runs/tw/suite --arms random,real-only,real-10%
    # simulated arms, with the experience model served by vLLM
    python benchmarks/bench_sim_to_real.py --suite runs/tw/suite --arms sim-only,s2r \\
        --base-url http://127.0.0.1:8000/v1 --model experience-model \\
        --model-dir runs/em/model --buffer runs/em/buffer.sqlite
    # only rebuild the table from the arm files in runs/bench_sim_to_real/arms
    python benchmarks/bench_sim_to_real.py --suite runs/tw/suite --arms none
    # plumbing check at a tiny budget (scripted fake model, no server)
    python benchmarks/bench_sim_to_real.py --suite /tmp/suite --train-games 2 --heldout-games 2 \\
        --total-timesteps 2560 --n-steps 8 --eval-episodes 10 --seeds 0 --backend scripted

``--history-window`` and ``--top-k`` default to the values the experience model was trained with
(``env_settings`` in ``--model-dir``'s ``dreamgym_training.json``). The offline buffer is copied into
memory without its held-out-game transitions (``metadata["suite_split"] == "heldout"``), so the file
is never written and the simulator retrieves demonstrations of training games only.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from dreamgym_env.experience.memo import StepMemo
from dreamgym_env.experience.model import model_share

try:
    from _harness import arg_parser, mean_std, write_json
except ModuleNotFoundError:  # loaded by file path in the tests, which run from the repository root
    from benchmarks._harness import arg_parser, mean_std, write_json

ARMS = ("random", "real-only", "real-10%", "sim-only", "s2r")
SIM_ARMS = ("sim-only", "s2r")
SIM_ID = "DreamGym/TextWorld-v0"
REAL_ID = "DreamGym/TextWorld-Real-v0"
TRAINING_MANIFEST = "dreamgym_training.json"
EVAL_SEED_BASE = 1_000_000  # evaluation episode seeds: EVAL_SEED_BASE + 10_000 * seed + episode
# Settings that must agree for two arm files to share a table.
COMPARABLE = (
    "suite",
    "train_games",
    "heldout_games",
    "total_timesteps",
    "n_steps",
    "num_envs",
    "batch_size",
    "n_epochs",
    "learning_rate",
    "ent_coef",
    "max_steps",
    "max_actions",
    "eval_episodes",
)


# ---------------------------------------------------------------------------------------- settings
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = arg_parser(__doc__)
    p.add_argument("--suite", required=True, help="suite folder (suite.json), see textworld_suite")
    p.add_argument("--train-games", type=int, default=16, help="first N training games of the suite")
    p.add_argument("--heldout-games", type=int, default=32, help="first M held-out games of the suite")
    p.add_argument(
        "--arms",
        default=",".join(ARMS),
        help="comma-separated subset of " + ",".join(ARMS).replace("%", "%%"),
    )
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--total-timesteps", type=int, default=51_200, help="B")
    p.add_argument("--eval-episodes", type=int, default=100, help="per split, per seed")
    p.add_argument("--max-steps", type=int, default=20, help="per episode, training and evaluation")
    p.add_argument("--max-actions", type=int, default=32, help="K of DiscreteActions")
    p.add_argument(
        "--skip-verbs",
        nargs="*",
        default=[],
        help="first words of commands no arm's policy is offered (DiscreteActions' skip_verbs), e.g. "
        "look inventory examine",
    )
    p.add_argument("--num-envs", type=int, default=16, help="envs per rollout (concurrent in the sim)")
    p.add_argument("--n-steps", type=int, default=32, help="steps per env per rollout")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--n-epochs", type=int, default=10)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--backend", default=None, help="'scripted' for a plumbing run without a server")
    p.add_argument("--base-url", default=None, help="experience model server (OpenAI API)")
    p.add_argument("--model", default=None, help="served experience model name")
    p.add_argument("--model-dir", default=None, help=f"trained model folder ({TRAINING_MANIFEST})")
    p.add_argument("--buffer", default=None, help="offline replay buffer (retrieval), training games")
    p.add_argument("--max-tokens", type=int, default=512, help="answer budget of a simulated step")
    p.add_argument("--history-window", type=int, default=None)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument(
        "--memo",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="answer a repeated simulated step from the memo (dreamgym_env.experience.memo), seeded with "
        "the offline data; --no-memo asks the model for every step the rules do not answer",
    )
    p.add_argument(
        "--replay-real",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="answer a simulated step the offline data holds with that real transition (EnvConfig.replay_real); "
        "--no-replay-real leaves every step but the rule-fixed ones to the model, the simulator alone",
    )
    p.add_argument(
        "--setting",
        choices=("privileged", "learned"),
        default="privileged",
        help="what the simulator may know of the real games (EnvConfig.setting); 'learned' replays no real "
        "transition and seeds no memo with them",
    )
    p.add_argument(
        "--guided-answers",
        action="store_true",
        help="EnvConfig.guided_answers: the model chooses among the outcomes the domain writes out",
    )
    p.add_argument("--out", default="runs/bench_sim_to_real/table.md")
    args = p.parse_args(argv)
    if args.setting == "learned":
        args.replay_real = False  # no real transition of the same game answers a learned dream's step
    arms = [a.strip() for a in args.arms.split(",") if a.strip() and a.strip() != "none"]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        p.error(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
    args.arm_list = [a for a in ARMS if a in arms]
    args.seed_list = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.model_dir:
        settings = model_env_settings(args.model_dir)
        for key in ("history_window", "top_k"):
            if getattr(args, key) is None and settings.get(key) is not None:
                setattr(args, key, int(settings[key]))
    if any(a in SIM_ARMS for a in args.arm_list) and not (args.backend or args.base_url):
        p.error("the simulated arms need --base-url and --model (or --backend scripted)")
    return args


def model_env_settings(model_dir: str) -> dict[str, Any]:
    """The env settings an experience model was trained with (``history_window``, ``top_k``...)."""
    path = Path(model_dir) / TRAINING_MANIFEST
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")).get("env_settings") or {})
    except (OSError, ValueError) as e:
        raise SystemExit(f"cannot read {path}: {e}") from e


def config_of(args: argparse.Namespace, arm: str) -> dict[str, Any]:
    """What an arm's figures depend on (recorded in its file; COMPARABLE keys must agree across arms)."""
    config = {k: getattr(args, k) for k in COMPARABLE}
    config["suite"] = str(Path(args.suite).resolve())
    if args.skip_verbs:  # recorded only when set, so earlier arm files keep their settings
        config["skip_verbs"] = list(args.skip_verbs)
    if arm in SIM_ARMS:
        config.update(
            {
                k: getattr(args, k)
                for k in (
                    "backend",
                    "base_url",
                    "model",
                    "model_dir",
                    "buffer",
                    "history_window",
                    "top_k",
                    "memo",
                )
            }
        )
        if not args.replay_real:  # recorded only when off, so earlier arm files keep their settings
            config["replay_real"] = False
        if args.setting != "privileged":  # likewise
            config["setting"] = args.setting
        if args.guided_answers:
            config["guided_answers"] = True
    return config


def ppo_args(args: argparse.Namespace, env_id: str, seed: int, timesteps: int) -> Any:
    """The :class:`~dreamgym_env.training.ppo.PPOSettings` of one phase: the same learner in every arm."""
    from dreamgym_env.training.ppo import PPOSettings

    return PPOSettings(
        env_id=env_id,
        algo="maskable_ppo",
        max_steps=args.max_steps,
        max_actions=args.max_actions,
        skip_verbs=tuple(args.skip_verbs),
        num_envs=args.num_envs,
        total_timesteps=timesteps,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        learning_rate=args.learning_rate,
        ent_coef=args.ent_coef,
        eval_episodes=args.eval_episodes,
        seed=seed,
        backend=args.backend,
        base_url=args.base_url,
        model=args.model,
    )


# ----------------------------------------------------------------------------------- offline data
def load_offline(path: str) -> tuple[Any, dict[str, int]]:
    """The offline buffer's training-game transitions, copied into an in-memory buffer for retrieval."""
    from dreamgym_env.buffer import ReplayBuffer

    source = ReplayBuffer.open(path)
    try:
        kept, heldout = [], 0
        for t in source.iter_transitions():
            if (t.metadata or {}).get("suite_split") == "heldout":
                heldout += 1
            else:
                kept.append(t)
        memory = ReplayBuffer(
            source.config.model_copy(update={"path": ":memory:", "dedup": "episode"}),
            embedder=source.embedder,
        )
    finally:
        source.close()
    memory.add_many(kept)
    return memory, {"offline_transitions": len(kept), "heldout_transitions_excluded": heldout}


# ------------------------------------------------------------------------------------------ running
class Runner:
    """Trains and evaluates the arms of one configuration."""

    def __init__(self, args: argparse.Namespace) -> None:
        from dreamgym_env.real.textworld_suite import load_suite

        self.args = args
        from dreamgym_env.training import ppo

        self.tp = ppo
        suite = load_suite(args.suite)
        self.train_paths = suite.paths("train")[: args.train_games]
        self.heldout_paths = suite.paths("heldout")[: args.heldout_games]
        if len(self.train_paths) < args.train_games or len(self.heldout_paths) < args.heldout_games:
            raise SystemExit(
                f"the suite has {len(suite.train)} training and {len(suite.heldout)} held-out games; "
                f"asked for {args.train_games} and {args.heldout_games}"
            )
        self.rollout = args.n_steps * args.num_envs
        self.real_budget = max(1, args.total_timesteps // 10)
        self.offline: dict[str, int] = {}
        self._retriever: Any = None
        self._sim_kwargs: dict[str, Any] | None = None
        self.memo: StepMemo | None = None
        real0 = ppo_args(args, REAL_ID, 0, 0)
        self.real_kwargs = self.tp.env_kwargs(real0, self.train_paths)
        self.eval_envs = {
            "train": self.tp.make_env(real0, self.tp.env_kwargs(real0, self.train_paths)),
            "heldout": self.tp.make_env(real0, self.tp.env_kwargs(real0, self.heldout_paths)),
        }

    def sim_kwargs(self) -> dict[str, Any]:
        """Simulated envs starting from the training games' real first states (built once)."""
        if self._sim_kwargs is None:
            a = self.args
            kwargs = self.tp.env_kwargs(ppo_args(a, SIM_ID, 0, 0), self.train_paths)
            kwargs["store_transitions"] = "none"  # the offline data stays what it was
            kwargs["max_tokens"] = a.max_tokens
            # A rare unparsable answer ends nothing: the step is a failure state with reward 0.
            kwargs["on_invalid_output"] = "fail_state"
            if a.history_window is not None:
                kwargs["history_window"] = a.history_window
            if a.top_k is not None:
                kwargs["top_k"] = a.top_k
            if a.buffer:
                self._retriever, self.offline = load_offline(a.buffer)
                kwargs["retriever"] = self._retriever
            else:
                self.offline = {"offline_transitions": 0, "heldout_transitions_excluded": 0}
            kwargs["replay_real"] = a.replay_real
            kwargs["setting"] = a.setting
            kwargs["guided_answers"] = a.guided_answers
            if a.memo:
                # One memo for every sim phase and seed: the simulated world is one function of
                # (game, state, action), asked once. Its real part is the offline data itself.
                self.memo = StepMemo()
                if self._retriever is not None and a.replay_real:
                    self.memo.add_real(self._retriever.iter_transitions())
                kwargs["step_memo"] = self.memo
            else:
                kwargs["memo_size"] = 0
            self._sim_kwargs = kwargs
        return self._sim_kwargs

    def close(self) -> None:
        for env in self.eval_envs.values():
            env.close()
        if self._retriever is not None:
            self._retriever.close()

    # ------------------------------------------------------------------ phases
    def _phase(self, model: Any, env_id: str, seed: int, timesteps: int, label: str) -> tuple[Any, dict]:
        """Train ``model`` (None: a new one) for ``timesteps`` steps of ``env_id``; steps, updates, seconds."""
        pa = ppo_args(self.args, env_id, seed, timesteps)
        kwargs = self.real_kwargs if env_id == REAL_ID else self.sim_kwargs()
        vec_env = self.tp.make_train_envs(pa, kwargs)
        memo0 = self.memo.stats() if self.memo is not None and env_id != REAL_ID else None
        from dreamgym_env.integrations.sb3 import AnsweredByCounter

        answered = AnsweredByCounter()
        try:
            if model is None:
                model = self.tp.build_model(pa, vec_env)
            steps0, updates0 = model.num_timesteps, model._n_updates
            started = time.perf_counter()
            if steps0 == 0:
                model.learn(total_timesteps=timesteps, callback=answered)
            else:
                self.tp.continue_training(model, vec_env, timesteps, callback=answered)
            seconds = time.perf_counter() - started
        finally:
            vec_env.close()
        steps = model.num_timesteps - steps0
        updates = (model._n_updates - updates0) // self.args.n_epochs  # MaskablePPO counts epochs
        print(
            f"  [{label} seed {seed}] {steps} {'real' if env_id == REAL_ID else 'simulated'} steps, "
            f"{updates} PPO updates, {seconds:.0f} s ({steps / max(seconds, 1e-9):.0f} steps/s)",
            flush=True,
        )
        phase: dict[str, Any] = {"steps": steps, "updates": updates, "seconds": round(seconds, 2)}
        if answered.counts:  # who answered the phase's simulated steps
            phase["answered_by"] = dict(sorted(answered.counts.items()))
            phase["model_share"] = model_share(answered.counts)
            phase["model_share_by_rollout"] = [round(model_share(c), 4) for c in answered.rollouts if c]
            print(f"  [{label} seed {seed}] answered by: {phase['answered_by']}", flush=True)
        if memo0 is not None and self.memo is not None:  # how the phase's simulated steps were answered
            now = self.memo.stats()
            phase["memo"] = {k: now[k] - memo0[k] for k in ("real_hits", "hits", "shared", "model_answers")}
            print(f"  [{label} seed {seed}] memo: {phase['memo']}", flush=True)
        return model, phase

    def evaluate(self, model: Any, seed: int) -> dict[str, float]:
        """Success rates in the real training and held-out games (episode seeds no training run uses)."""
        eval_seed = EVAL_SEED_BASE + 10_000 * seed
        return {
            f"success_{split}": self.tp.evaluate(model, env, self.args.eval_episodes, eval_seed)
            for split, env in self.eval_envs.items()
        }

    def run_seed(self, seed: int, arms: list[str], policies: Path) -> dict[str, dict[str, Any]]:
        """Every requested arm for one seed."""
        a, out = self.args, {}

        def record(arm: str, model: Any, real: dict | None, sim: dict | None, **extra: Any) -> None:
            real = real or {"steps": 0, "updates": 0, "seconds": 0.0}
            sim = sim or {"steps": 0, "updates": 0, "seconds": 0.0}
            started = time.perf_counter()
            success = self.evaluate(model, seed)
            out[arm] = {
                "seed": seed,
                "real_steps": real["steps"],
                "sim_steps": sim["steps"],
                "updates": real["updates"] + sim["updates"],
                "updates_sim": sim["updates"],
                "updates_real": real["updates"],
                "train_seconds": round(real["seconds"] + sim["seconds"], 2),
                "sim_train_seconds": sim["seconds"],
                "real_train_seconds": real["seconds"],
                "eval_seconds": round(time.perf_counter() - started, 2),
                "eval_seed": EVAL_SEED_BASE + 10_000 * seed,
                **success,
                **extra,
            }
            if model is not None:
                model.save(policies / f"{arm_file_stem(arm)}-seed{seed}.zip")
            print(
                f"  [{arm} seed {seed}] success: training games {success['success_train']:.2f}, "
                f"held-out games {success['success_heldout']:.2f}",
                flush=True,
            )

        if "random" in arms:
            record("random", None, None, None)
        if "real-only" in arms:
            model, real = self._phase(None, REAL_ID, seed, a.total_timesteps, "real-only")
            record("real-only", model, real, None)
        if "real-10%" in arms:
            model, real = self._phase(None, REAL_ID, seed, self.real_budget, "real-10%")
            record("real-10%", model, real, None)
        if "sim-only" in arms or "s2r" in arms:
            model, sim = self._phase(None, SIM_ID, seed, a.total_timesteps, "sim")
            if "sim-only" in arms:
                record(
                    "sim-only",
                    model,
                    None,
                    sim,
                    **self.offline,
                    memo=sim.get("memo"),
                    answered_by=sim.get("answered_by"),
                    model_share=sim.get("model_share"),
                )
            if "s2r" in arms:
                model, real = self._phase(model, REAL_ID, seed, self.real_budget, "s2r real")
                record(
                    "s2r",
                    model,
                    real,
                    sim,
                    sim_phase_shared="sim-only" in arms,
                    **self.offline,
                    memo=sim.get("memo"),
                    answered_by=sim.get("answered_by"),
                    model_share=sim.get("model_share"),
                )
        return out


def arm_file_stem(arm: str) -> str:
    return arm.replace("%", "pct")


def save_arm(arms_dir: Path, arm: str, config: dict[str, Any], record: dict[str, Any]) -> None:
    """Add one seed's record to the arm's file (a file with other settings is replaced)."""
    path = arms_dir / f"{arm_file_stem(arm)}.json"
    seeds: dict[str, Any] = {}
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        if old.get("config") == config:
            seeds = old.get("seeds", {})
        else:
            print(f"  note: {path} had other settings; replacing it", flush=True)
    seeds[str(record["seed"])] = record
    payload = {"arm": arm, "config": config, "seeds": dict(sorted(seeds.items(), key=lambda kv: int(kv[0])))}
    write_json(path, payload)


# ------------------------------------------------------------------------------------------- table
def fmt(s: dict[str, float]) -> str:
    if s["n"] == 1:
        return f"{s['mean']:.2f}"
    return f"{s['mean']:.2f} ± {s['std']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def fmt_count(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{int(lo):,}" if lo == hi else f"{int(lo):,}-{int(hi):,}"


def summarise(arm_files: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    summary = {}
    for arm, data in arm_files.items():
        rows = list(data["seeds"].values())
        col = {k: [r[k] for r in rows] for k in rows[0] if isinstance(rows[0][k], int | float)}
        summary[arm] = {
            "seeds": [r["seed"] for r in rows],
            "success_train": mean_std(col["success_train"]),
            "success_heldout": mean_std(col["success_heldout"]),
            "train_seconds": mean_std(col["train_seconds"]),
            **{k: col[k] for k in ("real_steps", "sim_steps", "updates", "updates_sim", "updates_real")},
            "offline_transitions": rows[0].get("offline_transitions"),
        }
    return summary


def targets(summary: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """The issue's three claims, on held-out success means."""

    def held(arm: str) -> float | None:
        return summary[arm]["success_heldout"]["mean"] if arm in summary else None

    checks = [
        ("sim-only >= 0.9 x real-only (held-out)", "sim-only", "real-only", lambda x, y: x >= 0.9 * y),
        ("s2r >= real-only (held-out)", "s2r", "real-only", lambda x, y: x >= y),
        ("s2r > real-10% (held-out)", "s2r", "real-10%", lambda x, y: x > y),
    ]
    out = []
    for name, left, right, test in checks:
        x, y = held(left), held(right)
        if x is None or y is None:
            out.append((name, f"not measured ({left if x is None else right} missing)"))
        else:
            out.append((name, f"{'holds' if test(x, y) else 'does not hold'} ({x:.3f} vs {y:.3f})"))
    return out


def build_table(out: Path) -> str:
    """The markdown table of every arm file in ``<out dir>/arms``; also writes ``results.json``."""
    arms_dir = out.parent / "arms"
    files = {}
    for arm in ARMS:
        path = arms_dir / f"{arm_file_stem(arm)}.json"
        if path.is_file():
            files[arm] = json.loads(path.read_text(encoding="utf-8"))
    if not files:
        return "no arm results yet\n"
    summary = summarise(files)
    first = next(iter(files.values()))["config"]
    lines = [
        "## Sim-to-real on TextWorld",
        "",
        f"Suite `{first['suite']}`: first {first['train_games']} training games, first "
        f"{first['heldout_games']} held-out games. B = {first['total_timesteps']:,} timesteps; "
        f"MaskablePPO rollouts of {first['num_envs']} envs x {first['n_steps']} steps, batch "
        f"{min(first['batch_size'], first['num_envs'] * first['n_steps'])}, {first['n_epochs']} epochs "
        f"per update; {first['max_steps']} steps per "
        f"episode; {first['eval_episodes']} evaluation episodes per split and seed, in the real games.",
        "",
    ]
    for arm, data in files.items():
        keys = (*COMPARABLE, "skip_verbs")
        diff = {k: data["config"].get(k) for k in keys if data["config"].get(k) != first.get(k)}
        if diff:
            lines += [f"- **Warning**: `{arm}` ran with other settings: {diff}.", ""]
    sim_cfgs = [files[a]["config"] for a in SIM_ARMS if a in files]
    sim_cfg = sim_cfgs[0] if sim_cfgs else None
    if len(sim_cfgs) == 2 and sim_cfgs[0] != sim_cfgs[1]:
        lines += ["- **Warning**: `sim-only` and `s2r` ran with other simulator settings (arm files).", ""]
    seed_sets = {arm: sorted(s["seeds"]) for arm, s in summary.items()}
    if len({tuple(v) for v in seed_sets.values()}) > 1:
        lines += [f"- **Warning**: the arms ran on different seeds: {seed_sets}.", ""]
    if sim_cfg:
        lines.append(
            f"Simulator: model `{sim_cfg.get('model') or sim_cfg.get('backend')}`, history window "
            f"{sim_cfg.get('history_window')}, top-k {sim_cfg.get('top_k')}, retrieval buffer "
            f"`{sim_cfg.get('buffer')}`; rollouts in the simulator run concurrently (SB3VecEnv)."
        )
    if lines[-1]:
        lines.append("")
    lines += [
        "| arm | seeds | real steps (RL) | simulated steps | offline transitions | PPO updates "
        "| train wall-clock (s) | success, real training games | success, real held-out games |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, s in summary.items():
        offline = s["offline_transitions"]
        updates = fmt_count(s["updates"])
        if arm == "s2r":
            updates += f" ({fmt_count(s['updates_sim'])} sim + {fmt_count(s['updates_real'])} real)"
        lines.append(
            f"| {arm} | {len(s['seeds'])} | {fmt_count(s['real_steps'])} | {fmt_count(s['sim_steps'])} "
            f"| {'-' if offline is None else f'{offline:,}'} | {updates} | "
            f"{s['train_seconds']['mean']:.0f} | {fmt(s['success_train'])} | {fmt(s['success_heldout'])} |"
        )
    lines += [
        "",
        "Success: mean ± sample standard deviation over seeds (min-max); per-seed figures in "
        "`results.json`. Real steps count training transitions only (evaluation episodes are not "
        "counted); offline transitions are the retrieval buffer's training-game transitions "
        "(the experience model's training data), used by the simulated arms only. Each learn call "
        "collects whole rollouts, so a budget that is not a multiple of the rollout size is rounded up.",
        "",
        "Targets:",
        "",
        *[f"- {name}: {verdict}" for name, verdict in targets(summary)],
        "",
    ]
    table = {
        arm: {
            split: {
                **{k: s[f"success_{split}"][k] for k in ("mean", "std", "min", "max")},
                "seeds": s["seeds"],
                "episodes": first["eval_episodes"],
            }
            for split in ("heldout", "train")
        }
        for arm, s in summary.items()
    }
    write_json(
        out.parent / "results.json",
        {
            # privileged: the game's layout and goal in every prompt, its real transitions replayed
            "setting": next(
                (f["config"].get("setting", "privileged") for arm, f in files.items() if arm in SIM_ARMS),
                None,
            ),
            "table": table,
            "targets": dict(targets(summary)),
            "summary": summary,
            "arms": files,
        },
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    args = parse_args(argv)
    out = Path(args.out)
    (out.parent / "arms").mkdir(parents=True, exist_ok=True)
    if args.arm_list:
        policies = out.parent / "policies"
        policies.mkdir(exist_ok=True)
        runner = Runner(args)
        rollout, budget = runner.rollout, runner.real_budget
        for name, steps in (("B", args.total_timesteps), ("B/10", budget)):
            if steps % rollout:
                print(
                    f"note: {name} = {steps} is not a multiple of the rollout ({rollout} steps); "
                    f"training rounds it up to {math.ceil(steps / rollout) * rollout}",
                    flush=True,
                )
        try:
            for seed in args.seed_list:
                print(f"seed {seed}: {', '.join(args.arm_list)}", flush=True)
                for arm, record in runner.run_seed(seed, args.arm_list, policies).items():
                    save_arm(out.parent / "arms", arm, config_of(args, arm), record)
        finally:
            runner.close()
    table = build_table(out)
    out.write_text(table, encoding="utf-8")
    print("\n" + table)
    print(f"table: {out}; per-seed results: {out.parent / 'results.json'}")
    return table


if __name__ == "__main__":
    main()
