"""Experience models that ship inside the package, and the settings they were trained with.

A shipped model is a small model this package trains itself (``scripts/build_textworld_model.sh``
rebuilds it from seeds and a fixed number of steps). Its folder holds the weights and tokenizer in the
form vLLM loads, ``dreamgym_training.json`` (the prompt settings the env must reuse) and
``manifest.json`` (data, seeds, metrics and the weights' checksum).

    dreamgym serve --model textworld            # vLLM's OpenAI server on 127.0.0.1, prints the base URL
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from dreamgym_env.errors import ConfigError

__all__ = ["SHIPPED_MODELS", "prompt_settings", "shipped_model_dir", "weights_checksum"]

_ROOT = Path(__file__).resolve().parents[1] / "models"

SHIPPED_MODELS: dict[str, str] = {
    "textworld": "TextWorld experience model (Llama architecture, trained from scratch on real games)",
}
"""Name -> what it is."""

_WEIGHTS = "model.safetensors"


def shipped_model_dir(name: str) -> Path:
    """The folder of a shipped model, checked to be complete.

    Raises:
        ConfigError: an unknown name, or a folder without weights.
    """
    if name not in SHIPPED_MODELS:
        raise ConfigError(f"No shipped model {name!r}; available: {sorted(SHIPPED_MODELS)}.")
    folder = _ROOT / name
    if not (folder / _WEIGHTS).is_file():
        raise ConfigError(
            f"The shipped model {name!r} has no weights in {folder}; rebuild it with "
            f"scripts/build_{name}_model.sh."
        )
    return folder


def _training_record(name: str) -> dict[str, Any]:
    path = _ROOT / name / "dreamgym_training.json"
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


def weights_checksum(folder: str | Path) -> str:
    """SHA-256 of a model folder's weights file (what a shipped model's manifest records)."""
    digest = hashlib.sha256()
    with (Path(folder) / _WEIGHTS).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
