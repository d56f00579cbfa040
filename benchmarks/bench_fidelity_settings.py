"""A TextWorld experience model in the learned and the privileged setting, on games no suite uses.

Makes ``--per-family`` games of each of the game suite's families (custom, treasure hunter, coin
collector, tw-simple) from seeds at 9,000,000 and up, which neither the suite's training nor its
held-out games use, and measures the served model three ways in each setting:

1. **Transitions**: every real transition of an expert and ``--episodes - 1`` noisy-expert episodes per
   game is asked of the model with the real history (``dreamgym eval-fidelity``'s runner), beside the
   model-free baselines: by verb family, by step kind (determined changes scored by exact match,
   revealing ones by consistency) and by who answered; win and loss recall and precision.
2. **The walkthrough in the dream**: the expert's real actions played in the simulated env, from
   the game's first state; paid when the dream ends the episode with its win.
3. **A random policy in the dream and in the real game**: ``--random-episodes`` episodes per game of
   random admissible commands, ``--max-steps`` steps at most, in both; success per family, who
   answered the simulated steps, and in the dream the revisits that contradict what the episode
   showed of a room (its things, its exits).

The model sees, in the privileged setting, the game's layout and goal; in the learned one, neither:
only the instruction, the first state, the episode and demonstrations of other games (the shipped
model's own), the layout its episode showed itself kept by the env. Writes one JSON.

    python benchmarks/bench_fidelity_settings.py --out docs/results/fidelity_textworld_settings.json
    python benchmarks/bench_fidelity_settings.py --base-url http://127.0.0.1:8000/v1   # a server already running
    python benchmarks/bench_fidelity_settings.py --model textworld-learned --guided-answers \
        --runs 3 --random-episodes 8 --out docs/results/fidelity_textworld_families.json
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from _harness import ROOT, arg_parser, git_commit, write_json

warnings.filterwarnings("ignore")

import gymnasium as gym  # noqa: E402

import dreamgym_env  # noqa: E402, F401 - registers the ids
from dreamgym_env.domains.textworld.state import parse_state, split_things  # noqa: E402
from dreamgym_env.domains.textworld.suite import _make_one, recipe_for  # noqa: E402
from dreamgym_env.evaluation.fidelity import FidelityReport, aggregate  # noqa: E402
from dreamgym_env.evaluation.runner import BASELINES, EvalRecord, evaluate, model_predictor  # noqa: E402
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest  # noqa: E402
from dreamgym_env.experience.backends.openai_http import OpenAIBackend  # noqa: E402
from dreamgym_env.experience.model import MODEL_ANSWERS, model_share  # noqa: E402
from dreamgym_env.real.textworld import play_noisy_expert, tasks_from_games  # noqa: E402
from dreamgym_env.records import Task, Transition  # noqa: E402
from dreamgym_env.rollout import Episode, EpisodeJob, RandomPolicy, aplay_on_envs  # noqa: E402
from dreamgym_env.serving.shipped import (  # noqa: E402
    SHIPPED_MODELS,
    recommended_env_kwargs,
    servable_folder,
    serve_shipped_model,
    shipped_model_dir,
    shipped_server,
    weights_checksum,
)
from dreamgym_env.training.sft_data import DemonstrationIndex, SFTBuildConfig, build_cases  # noqa: E402

FAMILIES = ("custom", "tw-treasure_hunter", "tw-coin_collector", "tw-simple")
UNSEEN_SEED = 9_000_000
"""First seed of these games: the suite uses 0 + i (training) and 1,000,000 + i (held out)."""
SETTINGS = ("privileged", "learned")


def make_games(folder: Path, per_family: int, first_seed: int = UNSEEN_SEED) -> dict[str, list[str]]:
    """``per_family`` games of each family, from the first seeds at ``first_seed`` whose drawn recipe is of it."""
    chosen: dict[str, list[tuple[int, Any]]] = {f: [] for f in FAMILIES}
    seed = first_seed
    while any(len(v) < per_family for v in chosen.values()):
        recipe = recipe_for(seed)
        if len(chosen[recipe[0]]) < per_family:
            chosen[recipe[0]].append((seed, recipe))
        seed += 1
    games: dict[str, list[str]] = {}
    for family, picks in chosen.items():
        games[family] = [_make_one(str(folder), ("heldout", i, s, r)).path for i, (s, r) in enumerate(picks)]
    return games


def family_of(task_id: str, games: dict[str, list[str]]) -> str:
    """The game family of a task id (``textworld-<file stem>``)."""
    for family, paths in games.items():
        if any(task_id == f"textworld-{Path(p).stem}" for p in paths):
            return family
    return "unknown"


@contextlib.contextmanager
def served(base_url: str | None, model_dir: str | None, model: str = "textworld") -> Iterator[str]:
    """The base URL of the model: ``base_url``, or a server started here for the run.

    The server serves the shipped ``model``, or the packaged model folder ``model_dir`` (a model trained
    with its prompt settings), under the shipped model's name, as the package serves its own.
    """
    if base_url:
        yield base_url
        return
    if model_dir is None:
        server = serve_shipped_model(model)
    else:
        server = shipped_server(servable_folder(Path(model_dir), model), model).start()
    try:
        yield server.base_url
    finally:
        server.stop()


def report_dict(report: FidelityReport) -> dict[str, Any]:
    """A report without its name (the JSON's keys say what it is)."""
    return {k: v for k, v in report.as_dict().items() if k != "name"}


def by_family(records: Sequence[EvalRecord], games: dict[str, list[str]], setting: str) -> dict[str, Any]:
    """The report of each game family's transitions."""
    grouped: dict[str, list[EvalRecord]] = defaultdict(list)
    for r in records:
        grouped[family_of(r.task_id, games)].append(r)
    return {f: report_dict(aggregate(f, [r.score for r in rs], setting)) for f, rs in sorted(grouped.items())}


class FirstSuccess(Backend):
    """A model-free baseline under the same rules and guidance as the model: it always picks success.

    Where the domain writes out a step's outcomes it takes the first success that goes on (``Done.``),
    never a win or a loss; a revealing step it cannot write (its answer is refused, a parse failure).
    """

    async def acomplete(self, request: CompletionRequest) -> Completion:
        choices = request.choices or ()
        return Completion(text=choices[1] if len(choices) > 1 else "Nothing happens.")


def score_transitions(
    base_url: str,
    real: list[Transition],
    demos: list[Transition],
    games: dict[str, list[str]],
    concurrency: int,
    guided_answers: bool = False,
    reveal_temperature: float | None = None,
    only: Sequence[str] | None = None,
    keep: Callable[[Transition], bool] | None = None,
    model: str = "textworld",
) -> dict[str, Any]:
    """The model and the baselines on every real transition, in both settings (the same samples).

    ``only`` names the predictors to run (all by default); ``keep`` scores only the transitions it
    accepts (each still asked with its episode's whole history).
    """
    kwargs = recommended_env_kwargs(model)
    out: dict[str, Any] = {}
    for setting in SETTINGS:
        config = SFTBuildConfig(
            domain="textworld",
            history_window=kwargs["history_window"],
            top_k=kwargs["top_k"],
            prompt_style=kwargs["prompt_style"],
            answer_format=kwargs["answer_format"],
            demonstrations="other_episodes",
            setting=setting,  # type: ignore[arg-type]
        )
        index = DemonstrationIndex(demos, "other_episodes")
        try:
            domain = dreamgym_env.get_domain("textworld")
            cases = [
                case
                for case in build_cases(real, index, config.top_k, learned_view=config.learned_view(domain))
                if keep is None or keep(case.transition)
            ]
        finally:
            index.close()
        rows: dict[str, Any] = {}
        backend = OpenAIBackend(
            dreamgym_env.BackendConfig(
                base_url=base_url,
                model=model,
                temperature=0.0,
                max_tokens=kwargs["max_tokens"],
                max_concurrency=concurrency,
                timeout=300.0,
            )
        )
        # Asked once, as the shipped model is played.
        asked_once = dreamgym_env.EnvConfig(
            parse_retries=0,
            answer_format="state",
            guided_answers=guided_answers,
            reveal_temperature=reveal_temperature,
        )
        predictors: dict[str, tuple[Any, Any]] = {
            "model": (model_predictor(backend, config, asked_once), backend),
            **{name: (baseline, None) for name, baseline in BASELINES.items()},
        }
        if guided_answers:  # what the model adds over the written-out outcomes
            predictors["first-success"] = (model_predictor(FirstSuccess(), config, asked_once), None)
        for name, (predictor, owner) in predictors.items():
            if only is not None and name not in only:
                continue
            started = time.perf_counter()
            work = evaluate(name, predictor, cases, concurrency=concurrency, setting=setting)
            report, records = asyncio.run(work if owner is None else owner.closing(work))
            rows[name] = {
                **report_dict(report),
                "seconds": round(time.perf_counter() - started, 1),
                "by_game_family": by_family(records, games, setting),
            }
            print(
                f"{setting:10s} {name:18s} n={report.transitions} EM={report.exact_match:.3f} "
                f"determined={report.determined_change_exact} revealing={report.revealing_consistent} "
                f"win R/P={report.success_recall}/{report.success_precision} "
                f"loss R/P={report.loss_recall}/{report.loss_precision}",
                flush=True,
            )
        out[setting] = rows
    return out


def sim_env(
    base_url: str,
    tasks: list[Task],
    setting: str,
    max_steps: int,
    guided_answers: bool,
    reveal_temperature: float | None = None,
    model: str = "textworld",
) -> gym.Env:  # type: ignore[type-arg]
    """A simulated TextWorld env of the shipped ``model``, in ``setting``."""
    return gym.make(
        "DreamGym/TextWorld-v0",
        tasks=tasks,
        base_url=base_url,
        max_steps=max_steps,
        **{
            **recommended_env_kwargs(model),
            "setting": setting,
            "guided_answers": guided_answers,
            "reveal_temperature": reveal_temperature,
        },
    )


def contradictions(episode: Episode) -> tuple[int, int]:
    """(revisits, revisits that contradict the episode): a room entered again must read as last shown.

    Its things (``Here``) and its exits' directions, as the episode's last state in that room showed
    them; door states may differ (a door opened from its other side).
    """
    last: dict[str, tuple[str, frozenset[str]]] = {}
    revisits = bad = 0
    for i, text in enumerate(episode.observations):
        parsed = parse_state(text)
        if parsed is None:
            continue
        room = parsed.lines["Room"]
        exits = frozenset(item.split(" (")[0] for item in split_things(parsed.lines["Exits"]))
        seen = (parsed.lines["Here"], exits)
        if i and episode.actions[i - 1].startswith("go ") and room in last:
            revisits += 1
            bad += last[room] != seen
        last[room] = seen
    return revisits, bad


def play_dream(
    base_url: str,
    tasks: list[Task],
    setting: str,
    jobs: list[tuple[Task, list[str] | None, int]],
    max_steps: int,
    concurrency: int,
    guided_answers: bool = False,
    reveal_temperature: float | None = None,
    model: str = "textworld",
) -> list[tuple[Episode, Counter[str]]]:
    """Play each job (a task; a fixed action list, or None for random admissible commands; a seed) in the dream."""
    envs = [
        sim_env(base_url, tasks, setting, max_steps, guided_answers, reveal_temperature, model).unwrapped
        for _ in range(concurrency)
    ]
    answered: list[Counter[str]] = [Counter() for _ in jobs]
    randoms = [RandomPolicy(seed=seed) for _, _, seed in jobs]

    async def policy(k: int, observation: str, info: dict[str, Any]) -> str:
        if "answered_by" in info:
            answered[k][str(info["answered_by"])] += 1
        script = jobs[k][1]
        if script is None:
            return randoms[k](observation, info)
        step = int(info.get("step", 0))
        return script[step] if step < len(script) else "look"

    work = [EpisodeJob(seed, {"task": task}) for task, _, seed in jobs]

    async def run() -> list[Episode]:
        try:
            return await aplay_on_envs(envs, work, policy)
        finally:
            for env in envs:
                await env.backend.aclose()

    episodes = asyncio.run(run())
    return list(zip(episodes, answered, strict=True))


def paired_difference(pairs: Sequence[tuple[bool, bool]]) -> dict[str, Any] | None:
    """Mean of ``dream - real`` over paired episodes, with a 95% interval (normal approximation, sample sd).

    The random policy's success in the dream is within a margin of the game's when the whole interval
    is; two means whose intervals touch tell nothing.
    """
    if len(pairs) < 2:
        return None
    differences = [float(d) - float(r) for d, r in pairs]
    mean = statistics.mean(differences)
    half = statistics.NormalDist().inv_cdf(0.975) * statistics.stdev(differences) / len(differences) ** 0.5
    return {"n": len(differences), "mean": mean, "ci95": [mean - half, mean + half]}


def episode_seed(game: int, episode: int) -> int:
    """The random policy's seed of one episode, the same in the dream and the real game (paired episodes).

    Both list the same commands in the same order, so a dream that matched the game step for step
    would play each episode exactly as the real one.
    """
    return 1000 * game + episode


def play_real_random(game: str, episodes: int, max_steps: int, index: int) -> list[bool]:
    """Success of ``episodes`` random-policy episodes of one real game (the ``index``-th)."""
    env = gym.make("DreamGym/TextWorld-Real-v0", game_files=[game], max_steps=max_steps)
    wins = []
    for e in range(episodes):
        policy = RandomPolicy(seed=episode_seed(index, e))
        obs, info = env.reset(seed=episode_seed(index, e))
        while True:
            obs, _, terminated, truncated, info = env.step(policy(obs, info))
            if terminated or truncated:
                wins.append(bool(info.get("success")))
                break
    env.close()
    return wins


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _difference(difference: dict[str, Any] | None) -> str:
    if not difference:
        return "-"
    low, high = difference["ci95"]
    return f"{difference['mean']:+.2f} ({low:+.2f}, {high:+.2f})"


def markdown(result: dict[str, Any]) -> str:
    """The result's three tables, as ``docs/experience_model.md`` quotes them."""
    settings = result["settings"]
    lines = [
        "| setting | predictor | n | state EM | determined changes EM (n) | revealing consistent (n) "
        "| win recall / precision | loss recall | model-answered |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for setting in SETTINGS:
        for name, row in settings[setting]["transitions"].items():
            kinds = row["by_kind"]
            answered = row["by_answered_by"]
            share = sum(answered.get(a, {}).get("n", 0) for a in MODEL_ANSWERS) / row["transitions"]
            lines.append(
                f"| {setting} | {name} | {row['transitions']} | {_cell(row['exact_match'])} "
                f"| {_cell(row['determined_change_exact'])} ({kinds.get('determined', {}).get('n', 0)}) "
                f"| {_cell(row['revealing_consistent'])} ({kinds.get('revealing', {}).get('n', 0)}) "
                f"| {_cell(row['success_recall'], 2)} / {_cell(row['success_precision'], 2)} "
                f"| {_cell(row['loss_recall'], 2)} | {_cell(share, 2)} |"
            )
    models = [settings[s]["transitions"]["model"] for s in SETTINGS]
    families = sorted(set().union(*(m["by_family"] for m in models)))
    lines += [
        "",
        "| verb family | n | privileged EM | learned EM | determined n | privileged EM | learned EM |",
        "|---|---|---|---|---|---|---|",
    ]
    for family in families:
        rows = [m["by_family"].get(family) for m in models]
        determined = [m.get("determined_by_family", {}).get(family) for m in models]
        n = next(r["n"] for r in rows if r)
        n_determined = next((r["n"] for r in determined if r), 0)
        lines.append(
            f"| {family} | {n} | "
            + " | ".join(_cell(r and r["exact_match"]) for r in rows)
            + f" | {n_determined} | "
            + " | ".join(_cell(r and r["exact_match"]) for r in determined)
            + " |"
        )
    lines += [
        "",
        "| game family | walkthrough paid (privileged / learned) | random success: real | dream, privileged "
        "| dream, learned | learned minus real (95% interval) | paired episodes ending alike "
        "(privileged / learned) | learned revisits contradicted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for family in FAMILIES:
        priv, learned = (settings[s]["random_policy"][family] for s in SETTINGS)
        alike = " / ".join(_cell(row.get("random_same_outcome"), 2) for row in (priv, learned))
        lines.append(
            f"| {family} | {_cell(priv['walkthrough_paid'], 2)} / {_cell(learned['walkthrough_paid'], 2)} "
            f"| {_cell(priv['random_success_real'], 2)} | {_cell(priv['random_success_dream'], 2)} "
            f"| {_cell(learned['random_success_dream'], 2)} | {_difference(learned.get('random_success_difference'))} "
            f"| {alike} "
            f"| {learned['contradictions']} of {learned['revisits']} |"
        )
    shares = [
        f"{s}: random policy {_cell(settings[s].get('random_model_share'), 2)}, walkthrough "
        f"{_cell(settings[s].get('walkthrough_model_share'), 2)}"
        for s in SETTINGS
    ]
    lines += ["", f"Simulated steps the model decided ({'; '.join(shares)})."]
    return "\n".join(lines) + "\n"


RUN_FIGURES = (
    ("transitions", "model", "exact_match"),
    ("transitions", "model", "determined_change_exact"),
    ("transitions", "model", "revealing_consistent"),
    ("transitions", "model", "success_recall"),
    ("transitions", "model", "success_precision"),
    ("transitions", "model", "loss_recall"),
    ("takes", "model", "loss_recall"),
    ("takes", "model", "loss_precision"),
    ("walkthrough_paid",),
    ("random_model_share",),
)
"""The figures of a setting compared across runs (median and range), beside the per-family ones."""


def run_figures(settings: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """One run's headline figures per setting: the targets' figures, and per family its random success and contradictions."""
    out: dict[str, dict[str, float | None]] = {}
    for setting, row in settings.items():
        figures: dict[str, float | None] = {}
        for path in RUN_FIGURES:
            value: Any = row
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            figures[".".join(path)] = value
        for family, fam in row["random_policy"].items():
            figures[f"{family}.random_success_dream"] = fam["random_success_dream"]
            figures[f"{family}.random_success_real"] = fam["random_success_real"]
            figures[f"{family}.walkthrough_paid"] = fam["walkthrough_paid"]
            figures[f"{family}.contradictions"] = fam["contradictions"]
            figures[f"{family}.revisits"] = fam["revisits"]
        out[setting] = figures
    return out


def spread(runs: list[dict[str, dict[str, float | None]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Median, min and max of each figure over the runs (figures a run did not measure left out)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for setting in runs[0]:
        out[setting] = {}
        for name in runs[0][setting]:
            values = [v for r in runs if (v := r[setting].get(name)) is not None]
            if values:
                out[setting][name] = {
                    "median": float(statistics.median(values)),
                    "min": min(values),
                    "max": max(values),
                }
    return out


_SPREAD_ROWS = (
    ("transitions.model.exact_match", "state exact match (real transitions)"),
    ("transitions.model.determined_change_exact", "determined changes exact"),
    ("transitions.model.revealing_consistent", "revealing steps consistent"),
    ("transitions.model.success_recall", "win recall"),
    ("transitions.model.success_precision", "win precision"),
    ("takes.model.loss_recall", "loss recall (takes of random play)"),
    ("takes.model.loss_precision", "loss precision (takes of random play)"),
    ("walkthrough_paid", "walkthrough paid"),
    ("random_model_share", "random-policy steps the model decided"),
)


def spread_markdown(result: dict[str, Any]) -> str:
    """The runs' figures as median [min-max] per setting, and per family random success and contradictions."""
    spread_of = result["spread"]

    def cell(setting: str, name: str, digits: int = 3) -> str:
        figure = spread_of[setting].get(name)
        if figure is None:
            return "-"
        if figure["min"] == figure["max"]:
            return _cell(figure["median"], digits)
        low, high = _cell(figure["min"], digits), _cell(figure["max"], digits)
        return f"{_cell(figure['median'], digits)} [{low}-{high}]"

    n = len(result["runs"])
    lines = [
        f"| figure ({n} run{'s' if n != 1 else ''}: median [range]) | privileged | learned |",
        "|---|---|---|",
        *[f"| {label} | {cell('privileged', key)} | {cell('learned', key)} |" for key, label in _SPREAD_ROWS],
        "",
        "| game family | random success: real | dream, privileged | dream, learned | learned revisits contradicted |",
        "|---|---|---|---|---|",
    ]
    for family in FAMILIES:
        revisits = spread_of["learned"].get(f"{family}.revisits")
        bad = cell("learned", f"{family}.contradictions", 0)
        lines.append(
            f"| {family} | {cell('learned', f'{family}.random_success_real')} "
            f"| {cell('privileged', f'{family}.random_success_dream')} "
            f"| {cell('learned', f'{family}.random_success_dream')} "
            f"| {bad} of {_cell(revisits['median'], 0) if revisits else '-'} |"
        )
    return "\n".join(lines) + "\n"


def worked_take(transition: Transition) -> bool:
    """A ``take`` the game carried out: it goes on, wins or loses."""
    return transition.action.startswith("take ") and not transition.next_state.startswith("Nothing happens")


def play_settings(
    base_url: str,
    args: Any,
    real: list[Transition],
    demos: list[Transition],
    games: dict[str, list[str]],
    tasks: list[Task],
    walkthroughs: dict[str, list[str]],
    real_random: dict[str, list[bool]],
    random_real: list[Transition],
) -> dict[str, Any]:
    """One run: the transitions scored, the walkthroughs and the random policy played, in each setting.

    ``random_real`` are real random-policy transitions: their ``take`` steps that worked are scored
    again on their own (``takes``), where the games' losses are (taking the wrong thing loses a
    treasure hunt).
    """
    by_id = {t.task_id: t for t in tasks}
    transitions = score_transitions(
        base_url,
        real,
        demos,
        games,
        args.concurrency,
        args.guided_answers,
        args.reveal_temperature,
        model=args.model,
    )
    takes = score_transitions(
        base_url,
        random_real,
        demos,
        games,
        args.concurrency,
        args.guided_answers,
        args.reveal_temperature,
        only=("model", "first-success"),
        keep=worked_take,
        model=args.model,
    )
    settings: dict[str, Any] = {}
    for setting in SETTINGS:
        expert_jobs = [(by_id[tid], actions, 0) for tid, actions in sorted(walkthroughs.items())]
        expert = play_dream(
            base_url,
            tasks,
            setting,
            expert_jobs,
            len(max(walkthroughs.values(), key=len)) + 1,
            args.concurrency,
            args.guided_answers,
            args.reveal_temperature,
            args.model,
        )
        random_jobs = [
            (by_id[tid], None, episode_seed(i, e))
            for i, tid in enumerate(real_random)  # in the order of the games: paired seeds
            for e in range(args.random_episodes)
        ]
        randoms = play_dream(
            base_url,
            tasks,
            setting,
            random_jobs,
            args.max_steps,
            args.concurrency,
            args.guided_answers,
            args.reveal_temperature,
            args.model,
        )
        real_of = [real_random[tid][e] for tid in real_random for e in range(args.random_episodes)]
        per_family: dict[str, Any] = {}
        for family in FAMILIES:
            ids = {f"textworld-{Path(p).stem}" for p in games[family]}
            paid = [ep.success for ep, _ in expert if ep.task_id in ids]
            dream = [ep.success for ep, _ in randoms if ep.task_id in ids]
            real_wins = [w for tid in ids for w in real_random[tid]]
            pairs = [
                (ep.success, won) for (ep, _), won in zip(randoms, real_of, strict=True) if ep.task_id in ids
            ]
            answered = sum((c for ep, c in randoms if ep.task_id in ids), Counter())
            revisits = [contradictions(ep) for ep, _ in randoms if ep.task_id in ids]
            per_family[family] = {
                "walkthrough_paid": sum(paid) / len(paid) if paid else None,
                "random_success_dream": statistics.mean(dream) if dream else None,
                "random_success_real": statistics.mean(real_wins) if real_wins else None,
                "random_episodes": len(dream),
                # Paired episodes (one seed in both): how often the dream ended as the game did.
                "random_same_outcome": statistics.mean(d == r for d, r in pairs) if pairs else None,
                # Dream minus real success over the paired episodes, with its 95% interval.
                "random_success_difference": paired_difference(pairs),
                "answered_by": dict(answered),
                "revisits": sum(r for r, _ in revisits),
                "contradictions": sum(b for _, b in revisits),
            }
        everything = sum((c for _, c in randoms), Counter())
        walked = sum((c for _, c in expert), Counter())
        settings[setting] = {
            "transitions": transitions[setting],
            "takes": takes[setting],
            "walkthrough_paid": sum(ep.success for ep, _ in expert) / len(expert),
            "random_policy": per_family,
            "random_answered_by": dict(everything),
            "random_model_share": model_share(everything),
            "walkthrough_answered_by": dict(walked),
            "walkthrough_model_share": model_share(walked),
        }
        print(setting, "walkthrough paid", settings[setting]["walkthrough_paid"], flush=True)
        for family, row in per_family.items():
            print(f"  {family}: {row}", flush=True)
    return settings


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--per-family", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=2, help="Real episodes per game for transitions.")
    parser.add_argument("--random-episodes", type=int, default=4, help="Random-policy episodes per game.")
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument("--games-dir", default=str(ROOT / "runs" / "unseen_games"))
    parser.add_argument("--base-url", help="A served model (default: serve it here).")
    parser.add_argument(
        "--model",
        default="textworld",
        choices=sorted(SHIPPED_MODELS),
        help="The shipped model to serve and score (its prompt settings, demonstrations and served name).",
    )
    parser.add_argument(
        "--model-dir",
        help="A packaged model folder to serve and score instead of the shipped one "
        "(scripts/package_textworld_model.py), trained with the shipped model's prompt settings.",
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--guided-answers",
        action="store_true",
        help="Play and score with EnvConfig.guided_answers: a choice among the outcomes TextWorld writes "
        "out, and revealing answers decoded in the form it gives.",
    )
    parser.add_argument(
        "--reveal-temperature",
        type=float,
        help="EnvConfig.reveal_temperature: sample the answers that reveal (with --guided-answers)",
    )
    parser.add_argument("--runs", type=int, default=1, help="Repeat the measurement (median and range).")
    parser.add_argument("--out", default=str(ROOT / "docs" / "results" / "fidelity_textworld_settings.json"))
    parser.add_argument("--markdown", help="Print the tables of this result file and stop.")
    args = parser.parse_args()
    if args.markdown:
        shown = json.loads(Path(args.markdown).read_text(encoding="utf-8"))
        print(markdown(shown), end="")
        if "spread" in shown:
            print("\n" + spread_markdown(shown), end="")
        return 0

    started, commit = time.perf_counter(), git_commit()  # the code this run loaded
    games = make_games(Path(args.games_dir), args.per_family)
    paths = [p for family in FAMILIES for p in games[family]]
    real = [
        t
        for i, game in enumerate(paths)
        for t in play_noisy_expert(game, args.episodes, 0.4, args.max_steps, i)
    ]
    print(
        f"{len(paths)} games, {len(real)} real transitions ({time.perf_counter() - started:.0f}s)", flush=True
    )
    from dreamgym_env.serving.shipped import shipped_demonstrations

    demo_buffer = shipped_demonstrations(args.model)
    demos = [t for t in demo_buffer.iter_transitions()] if demo_buffer is not None else []
    tasks = tasks_from_games(paths)
    walkthroughs = {
        t.task_id: [s.action for s in real if s.episode_id == t.episode_id]
        for t in real
        if t.step == 0 and t.metadata.get("policy") == "expert"
    }
    real_random: dict[str, list[bool]] = {}
    for i, game in enumerate(paths):
        real_random[f"textworld-{Path(game).stem}"] = play_real_random(
            game, args.random_episodes, args.max_steps, i
        )

    # Random-policy real episodes with their transitions (seeds apart from the transitions' own): the
    # games' losses.
    random_real = [
        t
        for i, game in enumerate(paths)
        for t in play_noisy_expert(game, 1 + args.random_episodes, 1.0, args.max_steps, 10_000 + i)
        if t.metadata.get("policy") != "expert"
    ]
    result: dict[str, Any] = {
        "commit": commit,
        "model": args.model,
        "model_dir": args.model_dir or f"dreamgym_env/models/{args.model}",
        "weights_sha256": weights_checksum(args.model_dir or shipped_model_dir(args.model)),
        "games": {f: [Path(p).name for p in ps] for f, ps in games.items()},
        "real_transitions": len(real),
        "random_real_transitions": len(random_real),
        "guided_answers": args.guided_answers,
        "reveal_temperature": args.reveal_temperature,
        "settings": {},
    }
    with served(args.base_url, args.model_dir, args.model) as base_url:
        runs = []
        for run in range(args.runs):
            print(f"run {run + 1} of {args.runs}", flush=True)
            runs.append(
                play_settings(
                    base_url, args, real, demos, games, tasks, walkthroughs, real_random, random_real
                )
            )
    result["settings"] = runs[0]  # the first run in full; every run's headline figures below
    result["runs"] = [run_figures(r) for r in runs]
    result["spread"] = spread(result["runs"])
    result["seconds"] = round(time.perf_counter() - started, 1)
    write_json(args.out, result)
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
