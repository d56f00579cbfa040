"""A shipped model's demonstrations: written into its folder once, read back as an in-memory replay buffer.

A shipped model (:mod:`dreamgym_env.shipped_settings`) was trained with one real transition of its
training games in every prompt, retrieved from ``demonstrations.jsonl.gz`` in its folder. An env that
names the model and brings no replay buffer of its own retrieves from these, so it never sends the
model a prompt it was not trained on. They live with the buffer, not with the serving code, because
building an env needs them and nothing else of serving.
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dreamgym_env.buffer.replay_buffer import ReplayBuffer, dedup_key
from dreamgym_env.errors import ConfigError
from dreamgym_env.records import Transition
from dreamgym_env.shipped_settings import SHIPPED_MODELS, file_sha256, model_folder, rebuild_command

logger = logging.getLogger(__name__)

DEMONSTRATIONS = "demonstrations.jsonl.gz"
"""The demonstrations' file name in a shipped model's folder."""


def write_demonstrations(transitions: Iterable[Transition], folder: str | Path) -> dict[str, Any]:
    """Write a model's demonstrations into its folder, byte-reproducibly; their manifest entry.

    A transition repeated across episodes is written once (the replay buffer's own dedup key).
    """
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
    return {"file": DEMONSTRATIONS, "transitions": count, "sha256": file_sha256(path)}


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
    folder = model_folder(name)
    path = folder / DEMONSTRATIONS
    if not path.is_file():
        return None
    recorded = json.loads((folder / "manifest.json").read_text(encoding="utf-8")).get("demonstrations") or {}
    digest = file_sha256(path)
    if digest != recorded.get("sha256"):
        raise ConfigError(
            f"{path} has SHA-256 {digest[:16]}..., not the {str(recorded.get('sha256'))[:16]}... the model's "
            f"manifest records; reinstall the package or rebuild it with {rebuild_command(name)}."
        )
    with gzip.open(path, "rt", encoding="utf-8") as f:
        transitions = [Transition.model_validate_json(line) for line in f if line.strip()]
    buffer = ReplayBuffer.open(":memory:", store_policy="real")
    buffer.add_many(transitions)
    logger.info(
        "retrieving demonstrations of the shipped %s model from its %d transitions", name, len(buffer)
    )
    return buffer
