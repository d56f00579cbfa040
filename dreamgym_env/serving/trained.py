"""Serve a model folder that ``dreamgym train`` wrote, as the package serves its shipped models on a CPU.

A trained folder is full weights (``--from-scratch``, full fine-tuning, ``--lora --merge-lora``) or a
LoRA adapter. An adapter is merged into its base first, once (cached by the adapter's SHA-256, as a
shipped adapter is: :func:`dreamgym_env.training.merge.merge_adapter`), since vLLM's CPU backend pays
for LoRA on every token. The base is the one given (``--base``), else the one the folder's training
record names (``dreamgym_training.json``: ``config.base_model``, a folder or a named PyPI-built base),
else the one the adapter's own ``adapter_config.json`` names.

The server gets the shipped models' CPU settings (:func:`~dreamgym_env.serving.shipped.shipped_server`):
a small KV cache and the engine bound to every core (:class:`VLLMServer`'s environment, without which
vLLM's CPU build asks for 92% of the machine's memory and refuses to start), bfloat16 where the CPU
computes it natively (:func:`~dreamgym_env.serving.vllm_server.cpu_dtype`), compiled, compact JSON in
structured decoding; and the model's own context, at most :data:`TRAINED_CONTEXT` tokens. The env keywords
come from the training record (:func:`trained_env_kwargs`).

    dreamgym serve --model runs/my-model      # prints the base URL and the gymnasium.make line
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dreamgym_env.errors import ConfigError
from dreamgym_env.shipped_settings import file_sha256
from dreamgym_env.training.train import TRAINING_MANIFEST as TRAINING_RECORD

if TYPE_CHECKING:
    from dreamgym_env.serving.vllm_server import VLLMServer

__all__ = [
    "SERVABLE",
    "TRAINED_CONTEXT",
    "TrainedModel",
    "is_model_folder",
    "model_context",
    "read_model_folder",
    "servable_trained_folder",
    "trained_env_kwargs",
    "trained_server",
]

TRAINED_CONTEXT = 4096
"""The longest context a trained model is served with unless asked for more: the env's prompts need 2-4k
tokens, and a longer context needs a KV cache that the CPU server's (1 GiB) may not hold."""

_WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")

SERVABLE = (
    "a servable folder holds config.json, model.safetensors and a tokenizer (full weights), or "
    "adapter_config.json and adapter_model.safetensors (a LoRA adapter, merged into its base first), "
    "as `dreamgym train --out DIR` writes them"
)
"""What a model folder holds, for the messages that refuse one."""


@dataclass(frozen=True)
class TrainedModel:
    """A model folder, checked: what it holds, its training record and, for an adapter, its base.

    Attributes:
        folder: The folder, as given.
        kind: ``"weights"`` (vLLM serves the folder itself) or ``"adapter"`` (merged into ``base`` first).
        record: ``dreamgym_training.json`` (empty where the folder has none).
        base: An adapter's base: a model folder, or the name of a PyPI-built base
            (:data:`dreamgym_env.training.bases.BASES`); ``None`` for full weights.
    """

    folder: Path
    kind: Literal["weights", "adapter"]
    record: dict[str, Any] = field(default_factory=dict)
    base: Path | str | None = None

    @property
    def env_settings(self) -> dict[str, Any]:
        """The record's ``env_settings``: the prompt settings the model was trained with."""
        settings = self.record.get("env_settings")
        return dict(settings) if isinstance(settings, dict) else {}

    @property
    def env_id(self) -> str | None:
        """The simulated Gymnasium id of the built-in domain the model was trained on, else ``None``."""
        from dreamgym_env.domains import BUILTIN_DOMAINS

        builtin = BUILTIN_DOMAINS.get(str(self.env_settings.get("domain")))
        return builtin.env_id if builtin is not None else None


def is_model_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder of full weights (with a config) or of a LoRA adapter (with its config)."""
    folder = Path(path)
    return _weights_folder(folder) or _adapter_folder(folder)


def _weights_folder(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any((folder / name).is_file() for name in _WEIGHTS)


def _adapter_folder(folder: Path) -> bool:
    return (folder / "adapter_config.json").is_file() and any(
        (folder / name).is_file() for name in _ADAPTER_WEIGHTS
    )


def read_model_folder(path: str | Path, *, base: str | Path | None = None) -> TrainedModel:
    """The model folder at ``path``, checked before anything is merged or started.

    Args:
        path: A folder ``dreamgym train`` wrote, or any folder of full weights or of a LoRA adapter.
        base: An adapter's base (a model folder, or a PyPI-built base's name), instead of the one the
            folder names.

    Raises:
        ConfigError: ``path`` is not a model folder (the message says what one holds), full weights
            without a tokenizer, an unreadable training record, or an adapter whose base is neither a
            folder here nor a named base; each in one line.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder; {SERVABLE}.")
    if _weights_folder(folder):
        if not any((folder / name).is_file() for name in _TOKENIZER):
            raise ConfigError(
                f"{folder} holds weights but no tokenizer ({', '.join(_TOKENIZER)}); {SERVABLE}."
            )
        return TrainedModel(folder, "weights", _record(folder))
    if _adapter_folder(folder):
        record = _record(folder)
        return TrainedModel(folder, "adapter", record, _adapter_base(folder, record, base))
    found = sorted(p.name for p in folder.iterdir())[:8]
    raise ConfigError(
        f"{folder} is not a model folder (it holds {', '.join(found) if found else 'nothing'}); {SERVABLE}."
    )


def _record(folder: Path) -> dict[str, Any]:
    """The folder's training record, ``{}`` where it has none.

    Raises:
        ConfigError: the record is there but is not a JSON object.
    """
    path = folder / TRAINING_RECORD
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"{path} cannot be read as JSON ({e}); it is the training record `dreamgym train` writes "
            "(its env_settings say how the env must prompt the model): restore it, or remove it to serve "
            "the model without it."
        ) from e
    if not isinstance(record, dict):
        raise ConfigError(
            f"{path} is not a JSON object; it should be the training record `dreamgym train` writes."
        )
    return record


def _adapter_base(folder: Path, record: dict[str, Any], given: str | Path | None) -> Path | str:
    """The base an adapter is merged into: ``given``, else the training record's, else ``adapter_config.json``'s.

    A candidate is used when it is a folder or the name of a PyPI-built base; an existing folder of
    that name wins over the name, as in training.

    Raises:
        ConfigError: no candidate is a folder or a named base; the message lists what was tried.
    """
    from dreamgym_env.training.bases import BASES

    candidates: list[tuple[str, str]] = []
    if given is not None:
        candidates.append(("--base", str(given)))
    else:
        config = record.get("config")
        if isinstance(config, dict) and isinstance(config.get("base_model"), str):
            candidates.append((TRAINING_RECORD, config["base_model"]))
        try:
            adapter_config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            adapter_config = {}
        named = adapter_config.get("base_model_name_or_path") if isinstance(adapter_config, dict) else None
        if isinstance(named, str) and named:
            candidates.append(("adapter_config.json", named))
    for _, name in candidates:
        if Path(name).expanduser().is_dir():
            return Path(name).expanduser().resolve()
        if name in BASES:
            return name
    tried = "; ".join(f"{name!r} ({source})" for source, name in candidates) or "none named"
    raise ConfigError(
        f"The LoRA adapter in {folder} cannot be merged: its base is neither a model folder here nor a "
        f"named base ({', '.join(sorted(BASES))}); tried {tried}. Give the base with --base DIR|NAME."
    )


def servable_trained_folder(model: TrainedModel, name: str) -> Path:
    """A folder vLLM serves for ``model``: its own (full weights), or its adapter merged into its base.

    The merge is cached under :func:`~dreamgym_env.training.merge.merged_dir` by the served name, the
    base's name and the adapter's SHA-256: served again, it is reused at once.

    Raises:
        BaseBuildError: building the base or merging failed; the message names the step.
    """
    if model.kind == "weights":
        return model.folder
    from dreamgym_env.training.merge import merge_adapter, merged_dir

    assert model.base is not None
    weights = next(model.folder / f for f in _ADAPTER_WEIGHTS if (model.folder / f).is_file())
    digest = file_sha256(weights)
    base_name = Path(model.base).name if isinstance(model.base, Path) else model.base
    return merge_adapter(model.folder, model.base, digest, merged_dir(f"{name}-on-{base_name}", digest))


def model_context(folder: str | Path) -> int | None:
    """The context a model folder's ``config.json`` gives (its position embeddings), or ``None`` if it says none."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for part in (config, config.get("text_config")) if isinstance(config, dict) else ():
        if isinstance(part, dict):
            for key in _CONTEXT_KEYS:
                value = part.get(key)
                if isinstance(value, int) and value > 0:
                    return value
    return None


def trained_server(
    folder: str | Path,
    name: str,
    *,
    port: int | None = None,
    max_model_len: int | None = None,
    dtype: str | None = None,
    startup_timeout: float = 600.0,
    log_path: str | Path | None = None,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> VLLMServer:
    """A server, not yet started, for a servable model ``folder`` (:func:`servable_trained_folder`), as ``name``.

    The shipped models' settings (:func:`~dreamgym_env.serving.shipped.shipped_server`), with the
    model's own context: ``max_model_len``, else the context its ``config.json`` gives, at most
    :data:`TRAINED_CONTEXT` (a larger one only when asked for). ``dtype``: default
    :func:`~dreamgym_env.serving.vllm_server.cpu_dtype`; on a GPU, ``"auto"``. ``extra_args`` come
    last, so a repeated flag overrides.
    """
    from dreamgym_env.serving.vllm_server import SMOKE_SERVER_ARGS, VLLMServer, cpu_dtype

    if max_model_len is None:
        max_model_len = min(model_context(folder) or TRAINED_CONTEXT, TRAINED_CONTEXT)
    return VLLMServer(
        folder,
        served_model_name=name,
        port=port,
        max_model_len=max_model_len,
        dtype=dtype or cpu_dtype(),
        enforce_eager=False,
        extra_args=[*SMOKE_SERVER_ARGS, *extra_args],
        env=env,
        startup_timeout=startup_timeout,
        log_path=log_path,
    )


def trained_env_kwargs(model: TrainedModel, name: str) -> dict[str, Any]:
    """The ``gymnasium.make`` keywords for ``model`` served as ``name``.

    The prompt settings its data was built with (the record's ``env_settings``: the ones
    :data:`~dreamgym_env.training.sft_data.PROMPT_SETTINGS` names), since the model answers well only
    to prompts like those it was trained on, and greedy decoding (``temperature=0``), as
    ``dreamgym eval-fidelity`` measures it. A folder without a record: the name alone.
    """
    from dreamgym_env.training.sft_data import PROMPT_SETTINGS

    settings = model.env_settings
    kwargs: dict[str, Any] = {"model": name}
    for key in PROMPT_SETTINGS:
        # history_window None means the whole history; any other setting None is one the data predates.
        if key in settings and (settings[key] is not None or key == "history_window"):
            kwargs[key] = settings[key]
    if settings:
        kwargs["temperature"] = 0.0
    return kwargs
