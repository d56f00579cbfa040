"""Simulator fidelity: replay held-out real transitions through an experience model and score them."""

from __future__ import annotations

from dreamgym_env.evaluation.fidelity import (
    FidelityReport,
    TransitionScore,
    aggregate,
    score_transition,
    set_f1,
    token_f1,
)

__all__ = ["FidelityReport", "TransitionScore", "aggregate", "score_transition", "set_f1", "token_f1"]
