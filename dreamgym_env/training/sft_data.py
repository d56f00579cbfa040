"""Supervised fine-tuning data for the experience model, built from real transitions.

Each example pairs the *exact* request the env sends at inference time (built with
:meth:`ExperienceModel.build_request`: domain instructions, task, history, retrieved demonstrations,
state and action) with the answer the real environment gave, as the JSON the model must emit.
Train and evaluation sets are split **by task**, never by transition: every transition of a held-out
task (all its episodes, whatever the policy) stays out of training, and demonstrations shown in any
prompt are drawn from training tasks only, so nothing of an evaluation task leaks into training. Where
several task ids play one game (a transition's ``game_id``, :attr:`Transition.game_id`: ALFWorld's
ReAct file plays each game as ``act_X`` and ``react_X``), the split is by game: a game's tasks are all
on one side, and a prompt's demonstrations never come from its own game.

Prompt length is bounded the way the env bounds it at inference: ``history_window`` (most recent
steps shown) and ``top_k`` (demonstrations). The same two values must be set on the env that serves
the trained model (``gymnasium.make(..., history_window=..., top_k=...)``); they are written to the
dataset manifest (``manifest.json``) and to the trained model's ``dreamgym_training.json``.
``max_prompt_chars`` drops (never cuts) examples whose prompt is longer still, because a cut prompt
would no longer be the request the env sends.

Transitions carry what the request needs besides their own fields in ``metadata``:
``task_metadata`` (the task's hidden facts, :attr:`Task.metadata`), ``admissible_actions`` (the real
admissible actions *after* the step, the target's list) and ``prev_admissible_actions`` (before it).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from dreamgym_env.config import AnswerFormat, EnvConfig, PromptStyle, Setting
from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.errors import ConfigError, DataFormatError
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.experience.model import ExperienceModel
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Step, Task, Transition

PROMPT_SETTINGS: tuple[str, ...] = (
    "history_window",
    "top_k",
    "max_admissible_actions",
    "prompt_style",
    "answer_format",
    "setting",
)
"""The env settings that shape a request, named alike on :class:`SFTBuildConfig` and
:class:`~dreamgym_env.config.EnvConfig`: the env serving a trained model must use the data's."""

_MANIFEST_FILE = "manifest.json"
_SPLIT_FILES = {"train": "train.jsonl", "eval": "eval.jsonl", "eval_episodes": "eval_episodes.jsonl"}
"""Example files by split: training, held-out tasks, held-out episodes of training tasks."""


@dataclass(frozen=True)
class SFTBuildConfig:
    """How transitions become examples.

    Attributes:
        domain: Domain name (its instructions open every prompt).
        history_window: Most recent steps of history in the prompt (the env's ``history_window``).
        top_k: Demonstrations retrieved per example (the env's ``top_k``).
        eval_fraction: Share of *tasks* held out for evaluation (of games, where tasks share one:
            :func:`split_by_task`).
        seed: Seeds the task split.
        max_prompt_chars: Examples whose prompt (all messages) is longer are dropped; ``None`` keeps all.
        max_admissible_actions: Cap on the target's admissible actions (the env's
            ``max_admissible_actions``, which the output schema enforces at inference).
        empty_reasoning: Reasoning used for transitions no teacher has annotated.
        heldout_tasks: Tasks to hold out (e.g. a game suite's held-out games); when given,
            ``eval_fraction`` is not used. A task that plays the same game as one named is held out
            too, so no game is on both sides.
        eval_episodes_per_task: Episodes of each *training* task held out as well (a seeded pick),
            written to ``eval_episodes.jsonl``: they measure how well the model simulates worlds it
            was trained on, on trajectories it never saw.
        demonstrations: Where demonstrations come from. ``"other_tasks"``: training transitions of
            other tasks only (the model must generalise across tasks). ``"other_episodes"``: any
            training transition outside the example's own episode, so other episodes of the same task
            are shown, as a buffer of a task's offline data serves them at inference.
        prompt_style: The env's ``prompt_style``: ``"compact"`` leaves the domain's instructions out,
            for a model that learns the rules from these examples.
        answer_format: The env's ``answer_format``: ``"json"`` completions are the JSON transition,
            ``"state"`` ones the next state alone, in the domain's answer form.
        setting: The env's ``setting``: ``"learned"`` prompts carry no hidden fact of the task
            (:meth:`Domain.learned_view`) and demonstrations of other tasks only, whatever
            ``demonstrations`` says; ``"privileged"`` ones carry the task's facts.
    """

    domain: str = "textworld"
    history_window: int | None = 2
    top_k: int = 1
    eval_fraction: float = 0.2
    seed: int = 0
    max_prompt_chars: int | None = None
    max_admissible_actions: int = 64
    empty_reasoning: str = ""
    heldout_tasks: tuple[str, ...] = ()
    eval_episodes_per_task: int = 0
    demonstrations: Literal["other_tasks", "other_episodes"] = "other_tasks"
    prompt_style: PromptStyle = "full"
    answer_format: AnswerFormat = "json"
    setting: Setting = "privileged"

    def __post_init__(self) -> None:
        object.__setattr__(self, "heldout_tasks", tuple(self.heldout_tasks))
        if self.setting not in ("learned", "privileged"):
            raise ConfigError(f"setting must be 'learned' or 'privileged', got {self.setting!r}.")
        if self.demonstrations not in ("other_tasks", "other_episodes"):
            raise ConfigError(
                f"demonstrations must be 'other_tasks' or 'other_episodes', got {self.demonstrations!r}."
            )
        if self.eval_episodes_per_task < 0:
            raise ConfigError(f"eval_episodes_per_task must be >= 0, got {self.eval_episodes_per_task}.")
        if not 0.0 < self.eval_fraction < 1.0:
            raise ConfigError(f"eval_fraction must be in (0, 1), got {self.eval_fraction}.")
        if self.top_k < 0 or (self.history_window is not None and self.history_window < 0):
            raise ConfigError("top_k and history_window must be >= 0 (history_window None keeps all).")

    def learned_view(self, domain: Domain) -> Callable[[Task], Task] | None:
        """What :func:`build_cases` takes for this setting: the domain's learned view, or ``None`` (privileged)."""
        return domain.learned_view if self.setting == "learned" else None

    def env_config(self) -> EnvConfig:
        """The env settings that reproduce these prompts at inference time."""
        return EnvConfig(**{name: getattr(self, name) for name in PROMPT_SETTINGS})


@dataclass(frozen=True)
class TransitionCase:
    """One real transition with everything its request needs."""

    task: Task
    history: tuple[Step, ...]
    demonstrations: tuple[Transition, ...]
    transition: Transition

    @property
    def prev_admissible(self) -> list[str]:
        """Admissible actions before the step (empty when not recorded)."""
        return list(self.transition.metadata.get("prev_admissible_actions") or [])


@dataclass
class SFTBuildReport:
    """What :func:`build_sft_dataset` wrote."""

    train_examples: int
    eval_examples: int
    train_tasks: list[str]
    eval_tasks: list[str]
    dropped_long: int
    annotated: int
    settings: dict[str, Any] = field(default_factory=dict)
    eval_episode_examples: int = 0
    eval_episodes: list[str] = field(default_factory=list)


def task_of(transition: Transition) -> Task:
    """The task a transition belongs to, as the env saw it (hidden facts from ``task_metadata``)."""
    return Task(
        task_id=transition.task_id,
        domain=transition.domain,
        instruction=transition.task,
        metadata=dict(transition.metadata.get("task_metadata") or {}),
    )


def target_output(
    transition: Transition, domain: Domain, *, max_actions: int = 64, empty_reasoning: str = ""
) -> ExperienceOutput:
    """The answer the model must learn for ``transition``: what the real environment did.

    In the domain's answer form: the next state as :meth:`Domain.state_answer` writes it, and no
    actions when the domain lists them itself (:attr:`Domain.lists_actions`).
    """
    listed = [] if domain.lists_actions else list(transition.metadata.get("admissible_actions") or [])
    return ExperienceOutput(
        reasoning=transition.reasoning or empty_reasoning,
        next_state=domain.state_answer(transition.state, transition.next_state),
        admissible_actions=listed[:max_actions],
        done=transition.done,
        success=transition.done and transition.success,
    )


def episodes_of(transitions: Iterable[Transition]) -> dict[str, list[Transition]]:
    """Transitions grouped by episode, each episode in step order.

    Raises:
        DataFormatError: an episode has the same step twice (the buffer was filled with
            ``dedup="content"``, which can drop steps of later episodes; use ``dedup="episode"``).
    """
    episodes: dict[str, list[Transition]] = defaultdict(list)
    for t in transitions:
        episodes[t.episode_id].append(t)
    for episode_id, steps in episodes.items():
        steps.sort(key=lambda t: t.step)
        numbers = [t.step for t in steps]
        if len(set(numbers)) != len(numbers):
            raise DataFormatError(
                f"episode {episode_id} has repeated steps {numbers}; rebuild the buffer with dedup='episode'",
            )
    return dict(episodes)


def split_by_task(
    task_ids: Iterable[str],
    eval_fraction: float,
    seed: int = 0,
    *,
    game_of: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """Split task ids into (train, eval), deterministically; both sides non-empty when there are 2+ games.

    Tasks that play one game (``game_of[task_id]``; a task it does not name is a game of its own) land
    on one side: the games are shuffled and ``eval_fraction`` of them held out. Without shared games
    the split is the one by task ids. It depends only on the set of ids, their games, the fraction and
    the seed, so rebuilding the data with more transitions of the same tasks keeps every task on its side.
    """
    ids = set(task_ids)
    games = dict(game_of or {})

    def game(task_id: str) -> str:
        return games.get(task_id, task_id)

    order = sorted({game(t) for t in ids})
    random.Random(seed).shuffle(order)
    if len(order) < 2:
        return sorted(ids), []
    n_eval = min(len(order) - 1, max(1, round(len(order) * eval_fraction)))
    held = set(order[:n_eval])
    return sorted(t for t in ids if game(t) not in held), sorted(t for t in ids if game(t) in held)


def _heldout_episodes(transitions: Iterable[Transition], per_task: int, seed: int = 0) -> list[str]:
    """A seeded pick of ``per_task`` episodes of every task (all but one when a task has fewer)."""
    if per_task <= 0:
        return []
    by_task: dict[str, set[str]] = defaultdict(set)
    for t in transitions:
        by_task[t.task_id].add(t.episode_id)
    picked: list[str] = []
    for task_id in sorted(by_task):
        episodes = sorted(by_task[task_id])
        n = min(per_task, len(episodes) - 1)
        picked += random.Random(f"{seed}:{task_id}").sample(episodes, n) if n > 0 else []
    return sorted(picked)


def split_transitions(
    transitions: Sequence[Transition], config: SFTBuildConfig
) -> tuple[dict[str, list[Transition]], list[str], list[str], list[str]]:
    """The grounded transitions of ``config.domain`` by split, with the train/eval task ids and eval episodes.

    Splits: ``train``; ``eval`` (held-out tasks); ``eval_episodes`` (held-out episodes of training tasks).
    """
    grounded = [t for t in transitions if t.domain == config.domain and t.source in ("offline", "real")]
    if not grounded:
        raise DataFormatError(
            f"no real or offline {config.domain!r} transitions to build SFT data from; collect real "
            "transitions into the buffer first",
        )
    all_tasks = {t.task_id for t in grounded}
    game_of = {t.task_id: t.game_id for t in grounded if t.game_id != t.task_id}
    if config.heldout_tasks:
        held_games = {game_of.get(t, t) for t in config.heldout_tasks}
        eval_set = {t for t in all_tasks if game_of.get(t, t) in held_games}
        train_ids, eval_ids = sorted(all_tasks - eval_set), sorted(eval_set)
    else:
        train_ids, eval_ids = split_by_task(all_tasks, config.eval_fraction, config.seed, game_of=game_of)
    train_set = set(train_ids)
    in_train = [t for t in grounded if t.task_id in train_set]
    episodes = set(_heldout_episodes(in_train, config.eval_episodes_per_task, config.seed))
    splits = {
        "train": [t for t in in_train if t.episode_id not in episodes],
        "eval": [t for t in grounded if t.task_id not in train_set],
        "eval_episodes": [t for t in in_train if t.episode_id in episodes],
    }
    return splits, train_ids, eval_ids, sorted(episodes)


class DemonstrationIndex:
    """Top-k similar transitions from *training* tasks, never from the query's own task (nor its game).

    Wraps an in-memory :class:`~dreamgym_env.buffer.ReplayBuffer` (the hashing embedder, as the env's
    default buffer) holding only training transitions.
    """

    def __init__(
        self,
        transitions: Sequence[Transition],
        scope: Literal["other_tasks", "other_episodes"] = "other_tasks",
    ) -> None:
        from dreamgym_env.buffer import ReplayBuffer

        self.scope = scope
        self._buffer = ReplayBuffer.open(":memory:", dedup="episode")
        if transitions:
            self._buffer.add_many(list(transitions))

    def retrieve(
        self, transition: Transition, k: int, *, other_tasks: bool = False
    ) -> tuple[Transition, ...]:
        """Up to ``k`` demonstrations for ``transition`` (from other tasks, or other episodes), best first.

        ``other_tasks`` takes them from other tasks whatever the index's scope (the learned setting).
        Another task playing the transition's game (:attr:`Transition.game_id`) is not another task
        here: its steps are this task's.
        """
        if k <= 0:
            return ()
        if self.scope == "other_episodes" and not other_tasks:
            hits = self._buffer.search(
                transition.state,
                transition.action,
                k,
                domain=transition.domain,
                exclude_episode=transition.episode_id,
            )
            return tuple(h.transition for h in hits)[:k]
        hits = self._buffer.search(transition.state, transition.action, 4 * k + 8, domain=transition.domain)
        return tuple(h.transition for h in hits if h.transition.game_id != transition.game_id)[:k]

    def close(self) -> None:
        """Release the in-memory buffer."""
        self._buffer.close()


def build_cases(
    transitions: Iterable[Transition],
    demonstrations: DemonstrationIndex | None,
    top_k: int,
    *,
    learned_view: Callable[[Task], Task] | None = None,
) -> Iterator[TransitionCase]:
    """Every transition with its task, full history (the model applies the window) and demonstrations.

    ``learned_view`` (a domain's :meth:`Domain.learned_view`) builds the cases of the learned setting:
    the task without its hidden facts, and demonstrations of other tasks only.
    """
    for steps in episodes_of(transitions).values():
        history: list[Step] = []
        for t in steps:
            demos = (
                ()
                if demonstrations is None
                else demonstrations.retrieve(t, top_k, other_tasks=bool(learned_view))
            )
            task = task_of(t) if learned_view is None else learned_view(task_of(t))
            yield TransitionCase(task, tuple(history), demos, t)
            history.append(Step(state=t.state, action=t.action))


def _example(model: ExperienceModel, case: TransitionCase, config: SFTBuildConfig) -> dict[str, Any]:
    request = model.build_request(
        case.task,
        case.history,
        case.demonstrations,
        case.transition.state,
        case.transition.action,
        case.prev_admissible,
    )
    answer = target_output(
        case.transition,
        model.domain,
        max_actions=config.max_admissible_actions,
        empty_reasoning=config.empty_reasoning,
    )
    return {
        "prompt": request.messages,
        "completion": [{"role": "assistant", "content": _answer_text(answer, config.answer_format)}],
        "task_id": case.task.task_id,
        "episode_id": case.transition.episode_id,
        "step": case.transition.step,
    }


def _answer_text(answer: ExperienceOutput, answer_format: AnswerFormat) -> str:
    """The completion a model learns, in the form the env parses (:attr:`EnvConfig.answer_format`)."""
    return answer.next_state if answer_format == "state" else answer.model_dump_json()


def _prompt_chars(example: dict[str, Any]) -> int:
    return sum(len(m["content"]) for m in example["prompt"])


def _output_folder(out_dir: str | Path) -> Path:
    """``out_dir``, made if missing; a file there (a buffer given as ``--out``) is refused, never replaced.

    Raises:
        ConfigError: ``out_dir`` is a file, or the folder cannot be made.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file, not a folder: give the folder to write the SFT data into")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot make the output folder {out}: {e.strerror or e}") from e
    return out


def build_sft_dataset(
    transitions: Iterable[Transition], out_dir: str | Path, config: SFTBuildConfig | None = None
) -> SFTBuildReport:
    """Write ``train.jsonl``, ``eval.jsonl`` and ``manifest.json`` (split and prompt settings) to ``out_dir``.

    Examples are TRL's conversational prompt-completion rows (``prompt``: the env's messages,
    ``completion``: the assistant's JSON answer), plus ``task_id``/``episode_id``/``step`` for tracing.
    Only grounded transitions (``offline`` or ``real``) are used: training on the simulator's own
    output would teach it its mistakes.
    """
    config = config or SFTBuildConfig()
    domain: Domain = get_domain(config.domain)
    splits, train_ids, eval_ids, eval_episodes = split_transitions(list(transitions), config)
    model = ExperienceModel(domain, ScriptedBackend(), config.env_config())
    index = DemonstrationIndex(splits["train"], config.demonstrations)
    out = _output_folder(out_dir)
    counts = dict.fromkeys(_SPLIT_FILES, 0)
    dropped = 0
    try:
        for split, items in splits.items():
            with (out / _SPLIT_FILES[split]).open("w", encoding="utf-8") as f:
                for case in build_cases(items, index, config.top_k, learned_view=config.learned_view(domain)):
                    example = _example(model, case, config)
                    if (
                        config.max_prompt_chars is not None
                        and _prompt_chars(example) > config.max_prompt_chars
                    ):
                        dropped += 1
                        continue
                    f.write(json.dumps(example, ensure_ascii=False) + "\n")
                    counts[split] += 1
    finally:
        index.close()
    report = SFTBuildReport(
        train_examples=counts["train"],
        eval_examples=counts["eval"],
        train_tasks=train_ids,
        eval_tasks=eval_ids,
        dropped_long=dropped,
        annotated=sum(1 for items in splits.values() for t in items if t.reasoning),
        settings=asdict(config),
        eval_episode_examples=counts["eval_episodes"],
        eval_episodes=eval_episodes,
    )
    (out / _MANIFEST_FILE).write_text(json.dumps(asdict(report), indent=1) + "\n", encoding="utf-8")
    return report


def load_manifest(data_dir: str | Path) -> SFTBuildReport:
    """Read the manifest :func:`build_sft_dataset` wrote (the split and the prompt settings)."""
    path = Path(data_dir) / _MANIFEST_FILE
    try:
        return SFTBuildReport(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as e:
        raise DataFormatError(
            f"cannot read the SFT manifest ({e}); build the data with `dreamgym build-sft` first",
            path=str(path),
        ) from e
