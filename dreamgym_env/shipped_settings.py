"""The experience models shipped inside the package and the env settings each was trained with.

A shipped model only answers well to the prompts it was trained on, so naming it (``model="textworld"``)
brings its training settings with it: the config reads them here when it is built. That is why this
module reads only the model's packaged JSON files (``dreamgym_training.json``) with the standard
library: the config sits below the replay buffer, the serving code and everything else the model's
weights and demonstrations need (:mod:`dreamgym_env.serving.shipped`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dreamgym_env.config import AnswerFormat, PromptStyle

_ROOT = Path(__file__).resolve().parent / "models"


@dataclass(frozen=True)
class ShippedModel:
    """A model that ships inside the package: what it is, the domain it simulates, how it is rebuilt."""

    description: str
    domain: str
    rebuild: str
    """The command that rebuilds it from nothing (named in every error about its files)."""

    def __str__(self) -> str:
        return self.description


SHIPPED_MODELS: dict[str, ShippedModel] = {
    "textworld": ShippedModel(
        "TextWorld experience model, privileged setting (a LoRA adapter on SmolLM2-135M-Instruct, "
        "trained on real games with their layout and goal)",
        domain="textworld",
        rebuild="scripts/build_textworld_model.sh",
    ),
    "textworld-learned": ShippedModel(
        "TextWorld experience model, learned setting (a LoRA adapter on SmolLM2-135M-Instruct, trained on "
        "real games without their layout or goal: it invents what the episode has not shown)",
        domain="textworld",
        rebuild="SETTING=learned scripts/build_textworld_model.sh",
    ),
}
"""Name -> the shipped model."""


SHIPPED_MAX_TOKENS = 256
"""Answer budget for a shipped model: its answers (the changed lines of a state) are under 100 tokens, so
this leaves room, while an answer that runs on is cut before it holds a batch up for long."""

SHIPPED_STATE_MAX_TOKENS = 64
"""Answer budget for a shipped model that answers plain states: the longest real TextWorld answer is 60
tokens, and an answer that never ends holds every request of its vector step for as many iterations
(docs/scaling.md, "Levers")."""


def rebuild_command(name: str) -> str:
    """The command that rebuilds the shipped model ``name`` (for errors about its files)."""
    model = SHIPPED_MODELS.get(name)
    return model.rebuild if model else "the script that built it"


def model_folder(name: str) -> Path:
    """Where the shipped model ``name``'s files are packaged (not checked to exist)."""
    return _ROOT / name


def trained_recipes(name: str) -> frozenset[str]:
    """The kinds of game a shipped model was trained on (its manifest's ``data.recipes``), or none known."""
    try:
        manifest = json.loads((model_folder(name) / "manifest.json").read_text(encoding="utf-8"))
        return frozenset(str(r) for r in manifest["data"]["recipes"])
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()


def _training_record(name: str) -> dict[str, Any]:
    path = model_folder(name) / "dreamgym_training.json"
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def prompt_settings(model: str | None, default: tuple[int | None, int] = (1, 1)) -> tuple[int | None, int]:
    """``(history_window, top_k)`` a shipped model was trained with, else ``default``."""
    if model not in SHIPPED_MODELS:
        return default
    settings = _training_record(model).get("env_settings") or {}
    if "top_k" not in settings:
        return default
    return settings.get("history_window"), int(settings["top_k"])


def prompt_style(model: str | None) -> PromptStyle:
    """The ``prompt_style`` a shipped model was trained with (``"full"`` for any other model)."""
    if model not in SHIPPED_MODELS:
        return "full"
    settings = _training_record(model).get("env_settings") or {}
    return "compact" if settings.get("prompt_style") == "compact" else "full"


def setting(model: str | None) -> str:
    """The simulation ``setting`` a shipped model was trained in (``"privileged"`` for any other model)."""
    if model not in SHIPPED_MODELS:
        return "privileged"
    settings = _training_record(model).get("env_settings") or {}
    return "learned" if settings.get("setting") == "learned" else "privileged"


def answer_format(model: str | None) -> AnswerFormat:
    """The ``answer_format`` a shipped model was trained with (``"json"`` for any other model)."""
    if model not in SHIPPED_MODELS:
        return "json"
    return recorded_answer_format(_training_record(model))


def recorded_answer_format(training: dict[str, Any]) -> AnswerFormat:
    """The ``answer_format`` a training record (``dreamgym_training.json``) names; ``"json"`` before records had one."""
    settings = training.get("env_settings") or {}
    return "state" if settings.get("answer_format") == "state" else "json"


def answer_budget(answers: AnswerFormat) -> int:
    """The ``max_tokens`` a shipped model answering in ``answers`` is played and scored with.

    :data:`SHIPPED_MAX_TOKENS` for JSON answers, :data:`SHIPPED_STATE_MAX_TOKENS` for plain states.
    """
    return SHIPPED_MAX_TOKENS if answers == "json" else SHIPPED_STATE_MAX_TOKENS


def recommended_env_kwargs(name: str) -> dict[str, Any]:
    """The ``gymnasium.make`` keywords that reproduce a shipped model's training prompts and fit its context.

    Greedy decoding (temperature 0): the model was trained to write the one next state the game's
    rules give, and its fidelity is measured that way; sampling only adds errors. A model answering
    plain states is asked once (``parse_retries=0``), as its fidelity is measured: a retry is sent only
    after the first answer ends and may run to ``max_tokens``, so it held every request of its vector step
    for the longest stretch of each (docs/scaling.md, "Levers"). An answer that does not parse keeps the
    state (``on_invalid_output="fail_state"``, ``info["model_error"]`` says why) instead of ending the
    run; a keyword still wins.
    """
    window, top_k = prompt_settings(name)
    answers = answer_format(name)
    kwargs: dict[str, Any] = {
        "model": name,
        "history_window": window,
        "top_k": top_k,
        "prompt_style": prompt_style(name),
        "answer_format": answers,
        "max_tokens": answer_budget(answers),
        "temperature": 0.0,
    }
    if answers == "state":
        kwargs.update(parse_retries=0, on_invalid_output="fail_state")
    if setting(name) == "learned":
        # Its figures are measured guided: the domain writes out what the episode showed, the model
        # chooses among those outcomes and writes only what is new (docs/env.md, "Guided answers").
        kwargs.update(setting="learned", guided_answers=True)
    return kwargs


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks: how a shipped model's manifest records each of its files."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
