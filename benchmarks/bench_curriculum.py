"""Curriculum vs uniform task sampling with simulated agents of known per-task success probability.

Each task has a fixed success probability p for a simulated agent. Most tasks are trivially solved or
impossible (p in {0, 1}); a few are at the edge (0 < p < 1). Only those give GRPO a non-zero
advantage, so the figure of merit is the fraction of each batch spent on them. We compare:

* uniform: :class:`~dreamgym_env.tasks.TaskList` over the seed tasks;
* curriculum: :class:`~dreamgym_env.curriculum.CurriculumSampler` reweighting the seeds by V;
* curriculum + generation: the same, with ``update()`` every few batches and a scripted "LLM" that
  proposes variants of the parents it is given (a variant keeps its parent's p up to noise, and one
  in three lands at p = 0 or 1, as a real generator sometimes misjudges difficulty).

Two batch shapes: GRPO groups (8 tasks x 8 rollouts) and single rollouts (64 tasks x 1), where
tasks without enough own outcomes are grouped by instruction similarity (tasks come in families of
five that share a template and a p).

Run: ``python benchmarks/bench_curriculum.py [--batches 100] [--seeds 3]``. Prints a markdown table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from _harness import arg_parser

from dreamgym_env.curriculum import CurriculumSampler, TaskPool
from dreamgym_env.domains import Domain, InitialState, register_domain_factory
from dreamgym_env.experience.backends.base import CompletionRequest
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.records import Task
from dreamgym_env.tasks import TaskList

VERBS = ["deliver", "inspect", "assemble", "repair", "collect", "sort", "label", "measure", "clean", "paint"]
ADJS = ["crimson", "wooden", "heavy", "fragile", "golden", "rusty", "silver", "narrow", "frozen", "bright"]
NOUNS = ["parcel", "crate", "shelf", "lantern", "engine", "barrel", "ladder", "mirror", "basket", "anchor"]
PLACES = ["harbor", "workshop", "tower", "market", "cellar", "garden", "bridge", "library", "station", "mill"]
ENDS = ["north", "south", "east", "west", "upper", "lower", "inner", "outer", "central", "old", "new", "far"]


class BenchDomain(Domain):
    """A placeholder domain: the benchmark never steps an env, it only samples tasks."""

    name = "bench"
    env_id = "DreamGym/Bench-v0"
    max_steps = 1
    instructions = "benchmark"
    action_help = "any text"

    def seed_tasks(self) -> list[Task]:
        return []

    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        return InitialState(state=task.instruction)


def make_tasks(rng: np.random.Generator, families: int = 20, per_family: int = 5, mixed_families: int = 2):
    """Families of tasks sharing a template and a success probability; ``mixed_families`` of them at 0<p<1."""
    tasks, p = [], {}
    mixed_ps = [0.2, 0.35, 0.5, 0.65, 0.8]
    for f in range(families):
        verb, adj, noun, place = VERBS[f % 10], ADJS[(3 * f) % 10], NOUNS[(7 * f) % 10], PLACES[(f // 2) % 10]
        prob = mixed_ps[f % len(mixed_ps)] if f < mixed_families else float(f % 2)
        for k in range(per_family):
            text = f"{verb} the {adj} {noun} to the {ENDS[k]} {place} gate"
            task = Task(task_id=f"bench-{f}-{k}", domain="bench", instruction=text, metadata={"family": f})
            tasks.append(task)
            p[text] = prob
    return tasks, p


def variant_responder(p: dict[str, float], rng: np.random.Generator) -> Callable[[CompletionRequest], dict]:
    """A scripted generator: one instruction per request, p near the parent's (0 or 1 a third of the time)."""

    def respond(request: CompletionRequest) -> dict:
        user = request.messages[1]["content"]
        parent = json.loads(re.search(r"^\{.*\}$", user, re.MULTILINE).group(0))["instruction"]
        words = [
            str(rng.choice(VERBS)),
            "the",
            str(rng.choice(ADJS)),
            str(rng.choice(NOUNS)),
            "to",
            "the",
            str(rng.choice(ENDS)),
            str(rng.choice(PLACES)),
            "gate",
            "number",
            str(int(rng.integers(1000))),
        ]
        text = " ".join(words)
        if rng.random() < 1 / 3:
            p[text] = float(rng.integers(2))
        else:
            p[text] = float(np.clip(p[parent] + rng.uniform(-0.2, 0.2), 0.05, 0.95))
        return {"reasoning": "vary the object and place", "variants": [{"instruction": text}]}

    return respond


@dataclass
class Result:
    on_mixed: float  # fraction of rollouts on tasks with 0 < p < 1
    groups_with_signal: float  # fraction of groups whose rewards differ (non-zero GRPO advantage)
    pool: int


def run(kind: str, *, seed: int, batches: int, groups: int, group_size: int, update_every: int) -> Result:
    rng = np.random.default_rng(seed)
    tasks, p = make_tasks(np.random.default_rng(1000 + seed))
    if kind == "uniform":
        sampler = TaskList(tasks)
    else:
        backend = (
            ScriptedBackend(variant_responder(p, np.random.default_rng(2000 + seed)))
            if kind == "generation"
            else None
        )
        sampler = CurriculumSampler(
            TaskPool(),
            "bench",
            seeds=tasks,
            backend=backend,
            generated_fraction=0.5,
            parents_per_update=4,
            candidates_per_task=1,
        )
    on_mixed, signal = [], []
    for b in range(batches):
        mixed = groups_mixed = 0
        for _ in range(groups):
            task = sampler.sample(rng)
            prob = p[task.instruction]
            rewards = (rng.random(group_size) < prob).astype(float)
            for r in rewards:
                sampler.record_outcome(task, float(r), bool(r))
            mixed += group_size * (0.0 < prob < 1.0)
            groups_mixed += len(set(rewards.tolist())) > 1
        on_mixed.append(mixed / (groups * group_size))
        signal.append(groups_mixed / groups)
        if kind == "generation" and (b + 1) % update_every == 0:
            sampler.update(seed=b)
    pool = len(sampler.pool) if isinstance(sampler, CurriculumSampler) else len(tasks)
    return Result(float(np.mean(on_mixed)), float(np.mean(signal)), pool)


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--update-every", type=int, default=10)
    args = parser.parse_args()
    register_domain_factory("bench", BenchDomain)

    print(
        "| batch shape | sampler | rollouts on 0<p<1 tasks | groups with reward signal | pool size "
        "| ratio vs uniform |"
    )
    print("|---|---|---|---|---|---|")
    for shape, groups, size in (("8 tasks x 8 rollouts", 8, 8), ("64 tasks x 1 rollout", 64, 1)):
        base = None
        for kind in ("uniform", "curriculum", "generation"):
            results = [
                run(
                    kind,
                    seed=s,
                    batches=args.batches,
                    groups=groups,
                    group_size=size,
                    update_every=args.update_every,
                )
                for s in range(args.seeds)
            ]
            mixed = float(np.mean([r.on_mixed for r in results]))
            signal = float(np.mean([r.groups_with_signal for r in results]))
            pool = int(np.mean([r.pool for r in results]))
            base = mixed if kind == "uniform" else base
            label = {
                "uniform": "uniform",
                "curriculum": "curriculum (V-weighted)",
                "generation": "curriculum + generation (lambda 0.5)",
            }[kind]
            signal_text = f"{signal:.1%}" if size > 1 else "n/a"
            print(f"| {shape} | {label} | {mixed:.1%} | {signal_text} | {pool} | {mixed / base:.2f}x |")


if __name__ == "__main__":
    main()
