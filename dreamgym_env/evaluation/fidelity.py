"""Fidelity metrics: how closely predicted transitions match the real environment's.

DreamGym judges an experience model by the error of its rewards and the consistency of its states,
which bound how well a policy trained in the simulator does in the real world. Per transition we
compare the prediction with what the real environment did:

* ``done`` and ``success`` accuracy (the reward error is ``1 - reward accuracy`` with the binary
  outcome reward ``done and success``), plus success recall, since winning steps are rare;
* next-state agreement: exact match (whitespace-normalised) and bag-of-words token F1;
* admissible-action agreement: F1 between the predicted and real command sets;
* parse failures: answers that gave no valid transition count as wrong on every metric.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.types import Transition

__all__ = ["FidelityReport", "TransitionScore", "aggregate", "score_transition", "set_f1", "token_f1"]

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


def score_transition(predicted: ExperienceOutput | None, real: Transition) -> TransitionScore:
    """Score one prediction (``None``: the model gave no valid answer) against the real transition.

    ``actions_f1`` is ``None`` when the real admissible actions were not recorded.
    """
    real_actions = real.metadata.get("admissible_actions")
    real_success = bool(real.done and real.success)
    if predicted is None:
        return TransitionScore(
            False, False, False, real_success, False, False, 0.0, None if real_actions is None else 0.0
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

    def as_dict(self) -> dict[str, object]:
        """Plain dict (for JSON)."""
        return asdict(self)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def aggregate(name: str, scores: Sequence[TransitionScore]) -> FidelityReport:
    """Average per-transition scores into a :class:`FidelityReport`."""
    wins = [s for s in scores if s.real_success]
    claimed = [s for s in scores if s.predicted_success]
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
    )
