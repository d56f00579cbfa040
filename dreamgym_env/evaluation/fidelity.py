"""Fidelity metrics: how closely predicted transitions match the real environment's.

DreamGym judges an experience model by the error of its rewards and the consistency of its states,
which bound how well a policy trained in the simulator does in the real world. Per transition we
compare the prediction with what the real environment did:

* ``done`` and ``success`` accuracy (the reward error is ``1 - reward accuracy`` with the binary
  outcome reward ``done and success``), plus success recall, since winning steps are rare;
* next-state agreement: exact match (whitespace-normalised) and bag-of-words token F1;
* admissible-action agreement: F1 between the predicted and real command sets;
* parse failures: answers that gave no valid transition count as wrong on every metric;
* the same figures by verb family, by the step's kind (:meth:`Domain.step_kind`: ``determined``
  changes, which follow from what the episode showed, are scored by exact match; ``revealing`` ones,
  which a learned dream invents, by consistency, :meth:`Domain.consistent_reveal`) and by who
  answered (model, memo, replay, rule), so a claim about the model rests on the steps it answered.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from dreamgym_env.experience.model import MODEL_ANSWERS
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Transition

_TOKEN = re.compile(r"\w+|[^\w\s]")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def token_f1(predicted: str, reference: str) -> float:
    """Bag-of-tokens F1 (lower-cased words and punctuation); 1.0 when both are empty."""
    pred, ref = Counter(_tokens(predicted)), Counter(_tokens(reference))
    if not pred and not ref:
        return 1.0
    overlap = sum((pred & ref).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / sum(pred.values()), overlap / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


def set_f1(predicted: Iterable[str], reference: Iterable[str]) -> float:
    """F1 between two sets of strings (stripped, case-insensitive); 1.0 when both are empty."""
    pred = {p.strip().lower() for p in predicted if p.strip()}
    ref = {r.strip().lower() for r in reference if r.strip()}
    if not pred and not ref:
        return 1.0
    overlap = len(pred & ref)
    if overlap == 0:
        return 0.0
    return 2 * overlap / (len(pred) + len(ref))


def _normalise(text: str) -> str:
    return " ".join(text.split()).lower()


@dataclass(frozen=True)
class TransitionScore:
    """One prediction scored against its real transition."""

    parsed: bool
    done_correct: bool
    success_correct: bool
    real_success: bool
    predicted_success: bool
    exact_match: bool
    state_f1: float
    actions_f1: float | None
    family: str = ""
    kind: str = ""
    answered_by: str = ""
    consistent: bool | None = None
    real_lost: bool = False
    predicted_lost: bool = False


def score_transition(
    predicted: ExperienceOutput | None,
    real: Transition,
    *,
    family: str = "",
    kind: str = "",
    answered_by: str = "",
    consistent: bool | None = None,
) -> TransitionScore:
    """Score one prediction (``None``: the model gave no valid answer) against the real transition.

    ``actions_f1`` is ``None`` when the real admissible actions were not recorded. ``family``,
    ``kind``, ``answered_by`` and ``consistent`` (for a revealing step) are recorded as given.
    """
    real_actions = real.metadata.get("admissible_actions")
    real_success = bool(real.done and real.success)
    real_lost = bool(real.done and not real.success)
    if predicted is None:
        return TransitionScore(
            False,
            False,
            False,
            real_success,
            False,
            False,
            0.0,
            None if real_actions is None else 0.0,
            family=family,
            kind=kind,
            answered_by=answered_by,
            consistent=False if consistent is not None else None,
            real_lost=real_lost,
        )
    pred_success = bool(predicted.done and predicted.success)
    return TransitionScore(
        parsed=True,
        done_correct=predicted.done == real.done,
        success_correct=pred_success == real_success,
        real_success=real_success,
        predicted_success=pred_success,
        exact_match=_normalise(predicted.next_state) == _normalise(real.next_state),
        state_f1=token_f1(predicted.next_state, real.next_state),
        actions_f1=None if real_actions is None else set_f1(predicted.admissible_actions, real_actions),
        family=family,
        kind=kind,
        answered_by=answered_by,
        consistent=consistent,
        real_lost=real_lost,
        predicted_lost=bool(predicted.done and not predicted.success),
    )


@dataclass(frozen=True)
class FidelityReport:
    """Aggregate fidelity of one predictor over a set of real transitions.

    Attributes:
        name: The predictor (model or baseline).
        transitions: How many were scored.
        parse_failure_rate: Share of answers that gave no valid transition.
        done_accuracy: Share with the right ``done``.
        success_accuracy: Share with the right outcome (``done and success``): 1 - the reward error.
        success_recall: Share of real winning steps predicted as wins (``None`` without any).
        success_precision: Share of predicted wins that are real (``None`` without any predicted).
        success_f1: Harmonic mean of the two (0.0 when wins exist and none is found; ``None`` when
            there are neither real nor predicted wins).
        loss_recall: Share of real losing steps (done without success) predicted as losses.
        loss_precision: Share of predicted losses that are real.
        determined_change_exact: Exact match over the steps whose change follows from what the
            episode showed (kind ``determined``); ``None`` without any.
        revealing_consistent: Share of revealing steps whose prediction is consistent with the real
            one (:meth:`Domain.consistent_reveal`); ``None`` without any.
        by_family: Per verb family: ``n``, ``exact_match``, ``answered_by_model`` (share the model
            answered, writing or ranking) and ``model_exact_match`` (exact match on those).
        by_kind: The same per kind (``determined``, ``revealing``, ``no_change``, ``observe``),
            with ``consistent`` for revealing steps.
        by_answered_by: ``n`` and ``exact_match`` per who answered (``model``, ``ranked``, ``memo``,
            ``replay``, ``rule``; ``baseline`` for a model-free predictor; ``none`` for a parse failure).
        determined_by_family: :attr:`by_family` over the determined steps only (the changes that
            follow from what the episode showed).
        setting: ``learned`` or ``privileged`` (what the simulator was allowed to see).
        exact_match: Share of next states equal to the real one (whitespace-normalised).
        state_f1: Mean token F1 of next states.
        actions_f1: Mean F1 of admissible-action sets (``None`` where not recorded).
    """

    name: str
    transitions: int
    parse_failure_rate: float
    done_accuracy: float
    success_accuracy: float
    success_recall: float | None
    success_precision: float | None
    exact_match: float
    state_f1: float
    actions_f1: float | None
    success_f1: float | None = None
    loss_recall: float | None = None
    loss_precision: float | None = None
    determined_change_exact: float | None = None
    revealing_consistent: float | None = None
    by_family: dict[str, dict[str, float]] = field(default_factory=dict)
    by_kind: dict[str, dict[str, float]] = field(default_factory=dict)
    by_answered_by: dict[str, dict[str, float]] = field(default_factory=dict)
    determined_by_family: dict[str, dict[str, float]] = field(default_factory=dict)
    setting: str | None = None

    def as_dict(self) -> dict[str, object]:
        """Plain dict (for JSON)."""
        return asdict(self)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _group(scores: Sequence[TransitionScore], key: str) -> dict[str, dict[str, float]]:
    groups: dict[str, list[TransitionScore]] = {}
    for score in scores:
        groups.setdefault(str(getattr(score, key)) or "unknown", []).append(score)
    table: dict[str, dict[str, float]] = {}
    for name, members in sorted(groups.items()):
        by_model = [s for s in members if s.answered_by in MODEL_ANSWERS]
        row: dict[str, float] = {
            "n": len(members),
            "exact_match": _mean([float(s.exact_match) for s in members]),
            "answered_by_model": len(by_model) / len(members),
        }
        if by_model:
            row["model_exact_match"] = _mean([float(s.exact_match) for s in by_model])
        judged = [s for s in members if s.consistent is not None]
        if judged:
            row["consistent"] = _mean([float(bool(s.consistent)) for s in judged])
        table[name] = row
    return table


def aggregate(name: str, scores: Sequence[TransitionScore], setting: str | None = None) -> FidelityReport:
    """Average per-transition scores into a :class:`FidelityReport`."""
    wins = [s for s in scores if s.real_success]
    claimed = [s for s in scores if s.predicted_success]
    losses = [s for s in scores if s.real_lost]
    claimed_losses = [s for s in scores if s.predicted_lost]
    determined = [s for s in scores if s.kind == "determined"]
    revealing = [s for s in scores if s.kind == "revealing" and s.consistent is not None]
    actions = [s.actions_f1 for s in scores if s.actions_f1 is not None]
    hits = sum(1 for s in wins if s.predicted_success)
    success_f1 = 2 * hits / (len(wins) + len(claimed)) if wins or claimed else None
    return FidelityReport(
        name=name,
        transitions=len(scores),
        parse_failure_rate=_mean([0.0 if s.parsed else 1.0 for s in scores]),
        done_accuracy=_mean([float(s.done_correct) for s in scores]),
        success_accuracy=_mean([float(s.success_correct) for s in scores]),
        success_recall=_mean([float(s.predicted_success) for s in wins]) if wins else None,
        success_precision=_mean([float(s.real_success) for s in claimed]) if claimed else None,
        exact_match=_mean([float(s.exact_match) for s in scores]),
        state_f1=_mean([s.state_f1 for s in scores]),
        actions_f1=_mean(actions) if actions else None,
        success_f1=success_f1,
        loss_recall=_mean([float(s.predicted_lost) for s in losses]) if losses else None,
        loss_precision=_mean([float(s.real_lost) for s in claimed_losses]) if claimed_losses else None,
        determined_change_exact=_mean([float(s.exact_match) for s in determined]) if determined else None,
        revealing_consistent=_mean([float(bool(s.consistent)) for s in revealing]) if revealing else None,
        by_family=_group(scores, "family"),
        by_kind=_group(scores, "kind"),
        by_answered_by=_group(scores, "answered_by"),
        determined_by_family=_group(determined, "family"),
        setting=setting,
    )
