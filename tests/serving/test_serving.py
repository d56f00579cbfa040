"""The smoke-model builder and the managed vLLM server.

Unit tests (seconds, no torch or vLLM) cover the build marker and the server's process lifecycle with
a stand-in server script; integration tests talk to the real vLLM server of the session fixture.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dreamgym_env.errors import ConfigError, ServerStartError
from dreamgym_env.experience.schema import ExperienceOutput, output_json_schema
from dreamgym_env.serving import (
    PREFIX_BLOCK_SIZE,
    VLLMServer,
    build_tiny_model,
    cpu_dtype,
    default_engine_env,
    default_smoke_model_dir,
    tiny_model,
)
from dreamgym_env.serving.tiny_model import MARKER_FILE, SmokeModelSpec, is_complete
from tests._grammar import answer_token_bound

# ------------------------------------------------------------------------------------------ unit


def _fake_build(out: Path, spec: SmokeModelSpec) -> dict[str, object]:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (out / name).write_text("{}")
    return {"train_steps": 0}


def test_spec_rejects_unsupported_arch_and_head_dim():
    with pytest.raises(ConfigError, match="llama"):
        SmokeModelSpec(arch="gpt2")
    with pytest.raises(ConfigError, match="head size"):
        SmokeModelSpec(hidden_size=64, num_attention_heads=4)  # head_dim 16 crashes vLLM's CPU attention
    with pytest.raises(ConfigError, match="train_steps"):
        SmokeModelSpec(train_steps=-1)
    with pytest.raises(ConfigError, match="whole number"):
        SmokeModelSpec(train_steps=2.5)


def test_digest_tracks_parameters_and_builder_version(monkeypatch):
    base = SmokeModelSpec()
    assert base.digest() == SmokeModelSpec().digest()
    assert base.digest() != SmokeModelSpec(seed=1).digest()
    assert base.digest() != SmokeModelSpec(train_steps=5).digest()
    before = base.digest()
    monkeypatch.setattr(tiny_model, "BUILDER_VERSION", "999")
    assert base.digest() != before
    assert SmokeModelSpec(train_steps=60).digest() == SmokeModelSpec(train_steps=60.0).digest()
    assert SmokeModelSpec().train_steps == tiny_model.DEFAULT_TRAIN_STEPS


def test_is_complete_needs_matching_marker_and_every_file(tmp_path):
    spec = SmokeModelSpec()
    assert not is_complete(tmp_path / "missing", spec)
    _fake_build(tmp_path, spec)
    assert not is_complete(tmp_path, spec)  # no marker: an interrupted build
    (tmp_path / MARKER_FILE).write_text(json.dumps({"digest": spec.digest()}))
    assert is_complete(tmp_path, spec)
    assert not is_complete(tmp_path, SmokeModelSpec(seed=7))
    (tmp_path / "model.safetensors").unlink()
    assert not is_complete(tmp_path, spec)
    (tmp_path / MARKER_FILE).write_text("not json")
    assert not is_complete(tmp_path, spec)


def test_build_is_idempotent_and_replaces_stale_builds(tmp_path, monkeypatch):
    calls = []

    def recording_build(out, spec):
        calls.append(spec)
        return _fake_build(out, spec)

    monkeypatch.setattr(tiny_model, "_build", recording_build)
    target = tmp_path / "model"
    target.mkdir()
    (target / "leftover.bin").write_text("from an interrupted build")

    assert build_tiny_model(target, train_steps=1) == target
    assert len(calls) == 1 and not (target / "leftover.bin").exists()
    marker = json.loads((target / MARKER_FILE).read_text())
    assert marker["digest"] == SmokeModelSpec(train_steps=1).digest() and marker["train_steps"] == 0
    assert marker["spec"]["train_steps"] == 1 and marker["spec"]["seed"] == 0

    build_tiny_model(target, train_steps=1)
    assert len(calls) == 1  # reused
    build_tiny_model(target, train_steps=2)
    assert len(calls) == 2  # other parameters: rebuilt
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no staging folders left behind


def test_failed_build_leaves_target_untouched(tmp_path, monkeypatch):
    def failing_build(out, spec):
        (out / "config.json").write_text("{}")
        raise RuntimeError("out of memory")

    monkeypatch.setattr(tiny_model, "_build", failing_build)
    with pytest.raises(RuntimeError, match="out of memory"):
        build_tiny_model(tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.integration
def test_two_builds_save_identical_weights(tmp_path):
    """Seeded, step-bounded, deterministic training: a second build, in a fresh process whose torch
    has another thread count, saves the same bytes; the marker records their checksum."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        first = build_tiny_model(tmp_path / "first", train_steps=12, seed=3)
        assert torch.get_num_threads() == 2  # the build's fixed thread count was undone
    finally:
        torch.set_num_threads(threads)
    script = (
        "import sys, torch; torch.set_num_threads(3); "
        "from dreamgym_env.serving import build_tiny_model; "
        "build_tiny_model(sys.argv[1], train_steps=12, seed=3)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "second")], check=True, env=env, timeout=600)
    markers = [json.loads((tmp_path / name / MARKER_FILE).read_text()) for name in ("first", "second")]
    checksum = tiny_model.weights_checksum(first)
    assert checksum == tiny_model.weights_checksum(tmp_path / "second")
    for marker in markers:
        assert marker["weights_sha256"] == checksum
        assert marker["train_steps"] == 12 and marker["seed"] == 3
        assert isinstance(marker["final_loss"], float) and marker["final_loss"] > 0
    assert markers[0]["final_loss"] == markers[1]["final_loss"]


def test_default_dir_follows_env_var(monkeypatch, tmp_path):
    monkeypatch.setenv("DREAMGYM_CACHE_DIR", str(tmp_path))
    assert default_smoke_model_dir() == tmp_path / f"smoke-model-{tiny_model.BUILDER_VERSION}"
    monkeypatch.delenv("DREAMGYM_CACHE_DIR")
    assert default_smoke_model_dir().parent == Path.home() / ".cache" / "dreamgym_env"


def test_server_command_and_environment(tmp_path):
    python = tmp_path / "venv" / "bin" / "python"
    (tmp_path / "venv" / "lib").mkdir(parents=True)
    (tmp_path / "venv" / "lib" / "libiomp5.so").write_bytes(b"")
    server = VLLMServer(
        "/models/tiny", served_model_name="tiny", port=8123, max_model_len=2048, python=python,
        extra_args=["--enable-lora"], env={"VLLM_CPU_KVCACHE_SPACE": "4"},
    )  # fmt: skip
    cmd = server.command
    assert cmd[:3] == [str(python), "-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(cmd[3:-2:2], cmd[4:-2:2], strict=True))
    assert flags["--model"] == "/models/tiny" and flags["--served-model-name"] == "tiny"
    assert flags["--port"] == "8123" and flags["--max-model-len"] == "2048" and flags["--host"] == "127.0.0.1"
    assert flags["--generation-config"] == "vllm" and flags["--dtype"] == "float32"
    assert "--enforce-eager" in cmd and cmd[-1] == "--enable-lora"
    assert cmd[cmd.index("--block-size") + 1] == str(PREFIX_BLOCK_SIZE)  # the prefix cache's granularity
    assert "--block-size" not in VLLMServer("m", port=1, block_size=None).command  # vLLM's own default
    env = server.environment
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "4"  # caller's override wins
    assert env["LD_PRELOAD"].split(":")[0].endswith("libiomp5.so")
    assert server.base_url == "http://127.0.0.1:8123/v1" and server.model == "tiny"
    with pytest.raises(ConfigError, match="list of arguments"):
        VLLMServer("m", extra_args="--enable-lora")
    with pytest.raises(ConfigError, match="block_size must be a positive"):
        VLLMServer("m", block_size=0)


def test_small_machine_gives_the_engine_every_cpu(monkeypatch, tmp_path):
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    env = VLLMServer("m", port=1).environment
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0,1" and env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    # The server's engine computes its steps itself (no worker process spinning beside it) ...
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    # ... but the in-process engine's environment never asks vLLM to run inside the caller's process.
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in default_engine_env()
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    assert VLLMServer("m", port=1).environment["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING")
    # The caller's choice wins, in the process environment or in ``env``.
    assert (
        VLLMServer("m", port=1, env={"VLLM_CPU_OMP_THREADS_BIND": "0"}).environment[
            "VLLM_CPU_OMP_THREADS_BIND"
        ]
        == "0"
    )
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "auto")
    env = VLLMServer("m", port=1).environment
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "auto" and "VLLM_CPU_NUM_OF_RESERVED_CPU" not in env
    # A large machine keeps vLLM's own NUMA-aware binding.
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    env = VLLMServer("m", port=1).environment
    assert "VLLM_CPU_OMP_THREADS_BIND" not in env and "VLLM_ENABLE_V1_MULTIPROCESSING" not in env


def test_cpu_dtype_follows_the_cpus_bfloat16_instructions(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16\n\nprocessor\t: 1\n")
    assert cpu_dtype(info) == "bfloat16"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 amx_tile amx_bf16\n")
    assert cpu_dtype(info) == "bfloat16"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n")
    assert cpu_dtype(info) == "float32"
    assert cpu_dtype(tmp_path / "missing") == "float32"


# A stand-in for the vLLM module: parses --port and behaves as MODE says.
FAKE_SERVER = textwrap.dedent(
    """
    import http.server, os, subprocess, sys, time
    mode = os.environ["FAKE_MODE"]
    port = int(sys.argv[sys.argv.index("--port") + 1])
    print("fake server starting on", port, flush=True)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(os.environ["FAKE_CHILD_PID"], "w").write(str(child.pid))
    if mode == "crash":
        print("ValueError: unsupported head size 16", flush=True)
        sys.exit(3)
    if mode == "hang":
        time.sleep(600)
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)


def _fake_server(tmp_path: Path, mode: str, **kwargs) -> tuple[VLLMServer, Path]:
    script = tmp_path / "fake_python"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "fake.py"} "$@"\n')
    script.chmod(0o755)
    (tmp_path / "fake.py").write_text(FAKE_SERVER)
    child_pid_file = tmp_path / "child.pid"
    env = {"FAKE_MODE": mode, "FAKE_CHILD_PID": str(child_pid_file)}
    return VLLMServer("m", python=script, env=env, **kwargs), child_pid_file


def _running(pid: int, *, group: bool) -> bool:
    """Whether the process (or any process of the group) runs; a zombie has ended.

    The killed server's children are orphans: init reaps them when it gets to it (on some machines
    seconds later, in some containers never), so an unreaped zombie must not count as a survivor.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pid, 0) if group else os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()  # after "pid (comm)": state ppid pgrp
        except OSError:  # ended while we looked
            continue
        if (int(fields[2]) == pid if group else int(stat.parent.name) == pid) and fields[0] not in "ZX":
            return True
    return False


def _gone(pid: int, *, group: bool = False, within: float = 30.0) -> bool:
    """Whether the process (or every process of the group) has ended, waiting for the kill to land."""
    deadline = time.monotonic() + within
    while _running(pid, group=group):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_startup_crash_reports_log_tail(tmp_path):
    server, child = _fake_server(tmp_path, "crash", startup_timeout=20)
    with pytest.raises(ServerStartError, match="status 3") as excinfo:
        server.start()
    assert "unsupported head size 16" in str(excinfo.value)
    assert excinfo.value.log_tail and not server.is_running()
    assert _gone(int(child.read_text()))  # the orphaned engine process was killed with its group


def test_startup_timeout_kills_the_process_group(tmp_path, monkeypatch):
    server, child = _fake_server(tmp_path, "hang", startup_timeout=1.5)
    # The first health check waits until the fake has started its engine child (a slow machine may take
    # longer than the timeout to start Python), so the timeout always finds a group to kill.
    healthy = server._healthy

    def started_then_unhealthy() -> bool:
        deadline = time.monotonic() + 120
        while not (child.exists() and child.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        return healthy()

    monkeypatch.setattr(server, "_healthy", started_then_unhealthy)
    with pytest.raises(ServerStartError, match="within 2 s") as excinfo:
        server.start()
    assert "fake server starting" in excinfo.value.log_tail
    assert server.returncode is not None and _gone(int(child.read_text()))


def test_lifecycle_stop_and_kill(tmp_path):
    with _fake_server(tmp_path, "serve", startup_timeout=20)[0] as server:
        assert server.is_running() and server.startup_seconds is not None and server.startup_seconds < 20
        with urllib.request.urlopen(f"{server.url}/health", timeout=5) as response:
            assert response.status == 200
    assert server.returncode == -signal.SIGTERM
    server.stop()  # idempotent

    server, child = _fake_server(tmp_path, "serve", startup_timeout=20)
    server.start()
    server.kill()
    assert server.returncode == -signal.SIGKILL and _gone(int(child.read_text()))
    with pytest.raises(ServerStartError, match="already started"):
        server.start()


# ----------------------------------------------------------------------------------- integration

CAPS = dict(max_reasoning_chars=100, max_state_chars=160, max_actions=4, max_action_chars=30)
# Caps so small that any answer fits in 300 tokens (for a prompt near the context length).
TINY_CAPS = dict(max_reasoning_chars=8, max_state_chars=8, max_actions=0, max_action_chars=8)


def _response_format(**caps: int) -> dict[str, object]:
    schema = output_json_schema(**caps)
    return {"type": "json_schema", "json_schema": {"name": "transition", "schema": schema, "strict": True}}


def _messages(seed: int, history_steps: int = 2) -> list[dict[str, str]]:
    rooms = ["countertop 1", "cabinet 2", "drawer 3", "fridge 1", "sinkbasin 1", "shelf 2"]
    lines = [f"Task: put a clean mug in cabinet {seed % 4 + 1}.", "", "History:"]
    for i in range(history_steps):
        room = rooms[(seed + i) % len(rooms)]
        lines.append(
            f"{i + 1}. state: You arrive at {room}. On the {room}, you see a mug {i % 3 + 1}, a pen 2."
        )
        lines.append(f"   action: go to {rooms[(seed + i + 1) % len(rooms)]}")
    lines += [
        "",
        f"Current state: You are in the kitchen (step {seed}).",
        "Action: take mug 1 from countertop 1",
    ]
    system = (
        "You are the experience model of alfworld, a household. Given the task, the history, similar "
        "transitions, the current state and action, answer with one JSON object."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def _within_caps(out: ExperienceOutput) -> bool:
    return (
        len(out.reasoning) <= CAPS["max_reasoning_chars"]
        and len(out.next_state) <= CAPS["max_state_chars"]
        and len(out.admissible_actions) <= CAPS["max_actions"]
        and all(len(a) <= CAPS["max_action_chars"] for a in out.admissible_actions)
    )


@pytest.mark.integration
def test_server_answers_chat_completion(openai_client, vllm_server):
    models = [m.id for m in openai_client.models.list().data]
    assert vllm_server.model in models
    reply = openai_client.chat.completions.create(
        model=vllm_server.model, messages=[{"role": "user", "content": "hello"}], max_tokens=8
    )
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert 0 < reply.usage.completion_tokens <= 8


@pytest.mark.integration
def test_structured_answers_parse_and_respect_caps(openai_client, vllm_server):
    """20 of 20 greedy answers are valid ExperienceOutput JSON, end by themselves and obey the caps."""

    def ask(seed):
        return openai_client.chat.completions.create(
            model=vllm_server.model, messages=_messages(seed, history_steps=seed % 6),
            max_tokens=answer_token_bound(**CAPS),
            temperature=0.0, response_format=_response_format(**CAPS),
        )  # fmt: skip

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(ask, range(20)))
    for reply in replies:
        choice = reply.choices[0]
        assert choice.finish_reason == "stop", choice.message.content
        out = ExperienceOutput.model_validate_json(choice.message.content)
        assert _within_caps(out), out


@pytest.mark.integration
def test_sampled_answers_stay_bounded(openai_client, vllm_server):
    """At temperature 1 the grammar still bounds every answer, below its worst-case token count.

    xgrammar 0.2.8 lets raw control characters (U+0000-U+001F except LF and CR) into JSON strings,
    which strict JSON parsers reject, so this test parses leniently; clients should too.
    """
    reply = openai_client.chat.completions.create(
        model=vllm_server.model, messages=_messages(3), max_tokens=answer_token_bound(**CAPS),
        temperature=1.0, n=16, seed=0,
        response_format=_response_format(**CAPS),
    )  # fmt: skip
    for choice in reply.choices:
        assert choice.finish_reason == "stop", choice.message.content
        out = ExperienceOutput.model_validate(json.loads(choice.message.content, strict=False))
        assert _within_caps(out)


@pytest.mark.integration
def test_long_prompt_fits_and_too_long_is_rejected(openai_client, vllm_server):
    import openai

    reply = openai_client.chat.completions.create(
        model=vllm_server.model, messages=_messages(1, history_steps=60), max_tokens=300, temperature=0.0,
        response_format=_response_format(**TINY_CAPS),
    )  # fmt: skip
    assert answer_token_bound(**TINY_CAPS) <= 300
    assert 1500 <= reply.usage.prompt_tokens <= 3700, reply.usage.prompt_tokens
    ExperienceOutput.model_validate_json(reply.choices[0].message.content)
    with pytest.raises(openai.BadRequestError):
        openai_client.chat.completions.create(
            model=vllm_server.model, messages=_messages(1, history_steps=150), max_tokens=300
        )


def _metric(base: str, name: str) -> float:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


@pytest.mark.integration
def test_shared_prefix_hits_the_prefix_cache(openai_client, vllm_server):
    first, second = _messages(40, history_steps=30), _messages(40, history_steps=30)
    second[-1]["content"] += " again"  # same long prefix, different ending
    hits_before = _metric(vllm_server.url, "vllm:prefix_cache_hits_total")
    for messages in (first, second):
        reply = openai_client.chat.completions.create(
            model=vllm_server.model, messages=messages, max_tokens=4
        )
    cached = reply.usage.prompt_tokens_details.cached_tokens
    assert cached >= 0.8 * reply.usage.prompt_tokens, reply.usage
    assert _metric(vllm_server.url, "vllm:prefix_cache_hits_total") - hits_before >= cached


@pytest.mark.integration
def test_killed_server_process_exits(smoke_model_dir):
    server = VLLMServer(smoke_model_dir, served_model_name="doomed", max_model_len=1024).start()
    try:
        assert server.is_running() and server._healthy()
        pid = server.pid
        server.kill()
        assert server.returncode == -signal.SIGKILL
        assert not server._healthy()
        assert _gone(pid, group=True)  # no engine process of its group survives
    finally:
        server.stop()
