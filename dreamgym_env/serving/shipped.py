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

__all__ = [
    "SHIPPED_CONTEXT",
    "SHIPPED_MAX_TOKENS",
    "SHIPPED_MODELS",
    "prompt_settings",
    "prompt_style",
    "recommended_env_kwargs",
    "serve_shipped_model",
    "shipped_model_dir",
    "weights_checksum",
]

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


def prompt_style(model: str | None) -> str:
    """The ``prompt_style`` a shipped model was trained with (``"full"`` for any other model)."""
    if model not in SHIPPED_MODELS:
        return "full"
    settings = _training_record(model).get("env_settings") or {}
    return str(settings.get("prompt_style") or "full")


def recommended_env_kwargs(name: str) -> dict[str, Any]:
    """The ``gymnasium.make`` keywords that reproduce a shipped model's training prompts and fit its context."""
    window, top_k = prompt_settings(name)
    return {
        "model": name,
        "history_window": window,
        "top_k": top_k,
        "prompt_style": prompt_style(name),
        "max_tokens": SHIPPED_MAX_TOKENS,
    }


SHIPPED_MAX_TOKENS = 512
"""Answer budget for a shipped model: its longest training answer is under 400 tokens, and prompt plus
answer must fit :data:`SHIPPED_CONTEXT`."""

SHIPPED_CONTEXT = 2048
"""Context window a shipped model is served with (its position embeddings' length)."""


def serve_shipped_model(
    name: str,
    *,
    port: int | None = None,
    startup_timeout: float = 300.0,
    log_path: str | Path | None = None,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Any:
    """Start vLLM's OpenAI server for a shipped model, served under its name (``model="textworld"``).

    The caller owns the returned, running :class:`~dreamgym_env.serving.VLLMServer`. The server flags
    are the smoke model's (compact JSON in structured decoding, cached-token counts in ``usage``).

    Raises:
        ConfigError: an unknown or incomplete shipped model.
        DependencyNotInstalled: vLLM is not installed.
        ServerStartError: the server did not start.
    """
    from dreamgym_env.serving.vllm_server import require_vllm, start_local_model

    folder = shipped_model_dir(name)
    require_vllm(f"Serving the shipped {name} model")
    return start_local_model(
        folder,
        name,
        port=port,
        max_model_len=SHIPPED_CONTEXT,
        extra_args=extra_args,
        startup_timeout=startup_timeout,
        log_path=log_path,
        env=env,
    )
