"""Every ``dreamgym`` command, and the ``gymnasium.make``/``make_vec`` keywords, against a table of bad values.

Each case must fail the way a user can act on: exit code not 0, one line from the package's errors
(``error: ...``, or a command's own ``INVALID ...``) or argparse's usage error, no Python traceback, and
no file created or changed in the folder it runs in. The values cover wrong types, out-of-range and
huge numbers, empty text, text that is not UTF-8 (a lone surrogate, which is how Python passes bytes
it cannot decode), folders given as files, missing and unwritable paths, and one file given as both
input and output.

The commands run in-process through :func:`dreamgym_env.cli.main`, with ``sys.stdout`` and
``sys.stderr`` as a real run has them (UTF-8; stderr escapes what it cannot encode). Starting a model
server is replaced by a failure, so a bad value that slipped through fails its case instead of
starting one.
"""

from __future__ import annotations

import hashlib
import io
import sys
from contextlib import closing
from pathlib import Path

import gymnasium as gym
import pytest

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env import ScriptedBackend
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.cli import main
from dreamgym_env.errors import DreamGymError
from dreamgym_env.records import Transition

SURROGATE = "caf\udce9"  # the bytes b"caf\xe9" (latin-1) as Python hands them over from argv
HUGE = str(10**30)
UNWRITABLE = "/proc/dreamgym-sweep/out"  # refused even to root: /proc takes no new files

# (case id, argv). Paths are relative to the workspace (see ``workspace``).
CASES: list[tuple[str, list[str]]] = [
    ("envs extra argument", ["envs", "extra"]),
    # serve: its bad values must be refused before a server could start
    ("serve port too big", ["serve", "--smoke", "--port", "99999"]),
    ("serve port negative", ["serve", "--smoke", "--port", "-1"]),
    ("serve port not a number", ["serve", "--smoke", "--port", "x"]),
    ("serve port empty", ["serve", "--smoke", "--port", ""]),
    ("serve unknown model", ["serve", "--model", "nope"]),
    ("serve empty model", ["serve", "--model", ""]),
    ("serve surrogate model", ["serve", "--model", SURROGATE]),
    ("serve train steps zero", ["serve", "--smoke", "--train-steps", "0"]),
    ("serve train steps huge", ["serve", "--smoke", "--train-steps", HUGE]),
    ("serve both", ["serve", "--smoke", "--model", "textworld"]),
    # buffer import
    ("import missing input", ["buffer", "import", "new.sqlite", "missing.jsonl", "--quiet"]),
    ("import surrogate input", ["buffer", "import", "new.sqlite", f"{SURROGATE}.jsonl", "--quiet"]),
    ("import empty input", ["buffer", "import", "new.sqlite", "", "--quiet"]),
    ("import buffer is a folder", ["buffer", "import", "folder", "in.jsonl", "--quiet"]),
    ("import buffer empty", ["buffer", "import", "", "in.jsonl", "--quiet"]),
    ("import buffer is the input", ["buffer", "import", "in.jsonl", "in.jsonl", "--quiet"]),
    ("import input is the buffer", ["buffer", "import", "b.sqlite", "b.sqlite", "--quiet"]),
    ("import buffer unwritable", ["buffer", "import", f"{UNWRITABLE}.sqlite", "in.jsonl", "--quiet"]),
    ("import buffer folder missing", ["buffer", "import", "no/such/b.sqlite", "in.jsonl", "--quiet"]),
    ("import dim too small", ["buffer", "import", "new.sqlite", "in.jsonl", "--dim", "3"]),
    ("import dim huge", ["buffer", "import", "new.sqlite", "in.jsonl", "--dim", HUGE]),
    ("import dim not a number", ["buffer", "import", "new.sqlite", "in.jsonl", "--dim", "1e3"]),
    ("import embedder without model", ["buffer", "import", "new.sqlite", "in.jsonl", "--embedder", "openai"]),
    ("import empty domain", ["buffer", "import", "new.sqlite", "in.jsonl", "--domain", ""]),
    ("import surrogate domain", ["buffer", "import", "new.sqlite", "in.jsonl", "--domain", SURROGATE]),
    ("import unknown format", ["buffer", "import", "new.sqlite", "in.jsonl", "--format", "csv"]),
    # buffer stats / search
    ("stats missing", ["buffer", "stats", "missing.sqlite"]),
    ("stats surrogate path", ["buffer", "stats", f"{SURROGATE}.sqlite"]),
    ("stats folder", ["buffer", "stats", "folder"]),
    ("stats empty path", ["buffer", "stats", ""]),
    ("stats a JSONL file", ["buffer", "stats", "in.jsonl"]),
    ("stats a task pool", ["buffer", "stats", "pool.sqlite"]),
    ("stats a recording", ["buffer", "stats", "rec.sqlite"]),
    ("stats another embedder", ["buffer", "stats", "b.sqlite", "--dim", "64"]),
    ("stats embedder without model", ["buffer", "stats", "b.sqlite", "--embedder", "sentence-transformers"]),
    ("stats dim zero", ["buffer", "stats", "b.sqlite", "--dim", "0"]),
    ("search k negative", ["buffer", "search", "b.sqlite", "--state", "s", "--action", "a", "-k", "-1"]),
    ("search k zero", ["buffer", "search", "b.sqlite", "--state", "s", "--action", "a", "-k", "0"]),
    ("search k huge", ["buffer", "search", "b.sqlite", "--state", "s", "--action", "a", "-k", HUGE]),
    ("search k not a number", ["buffer", "search", "b.sqlite", "--state", "s", "--action", "a", "-k", "two"]),
    ("search empty state", ["buffer", "search", "b.sqlite", "--state", "", "--action", "a"]),
    ("search surrogate state", ["buffer", "search", "b.sqlite", "--state", SURROGATE, "--action", "a"]),
    ("search surrogate action", ["buffer", "search", "b.sqlite", "--state", "s", "--action", SURROGATE]),
    ("search surrogate domain", ["buffer", "search", "b.sqlite", "--state", "s", "--action", "a", "--domain", SURROGATE]),
    ("search missing buffer", ["buffer", "search", "missing.sqlite", "--state", "s", "--action", "a"]),
    # buffer export
    ("export onto its buffer", ["buffer", "export", "b.sqlite", "b.sqlite"]),
    ("export onto another database", ["buffer", "export", "b.sqlite", "pool.sqlite"]),
    ("export onto a folder", ["buffer", "export", "b.sqlite", "folder"]),
    ("export into a missing folder", ["buffer", "export", "b.sqlite", "no/such/out.jsonl"]),
    ("export unwritable", ["buffer", "export", "b.sqlite", f"{UNWRITABLE}.jsonl"]),
    ("export empty output", ["buffer", "export", "b.sqlite", ""]),
    ("export surrogate missing folder", ["buffer", "export", "b.sqlite", f"{SURROGATE}/out.jsonl"]),
    ("export from a missing buffer", ["buffer", "export", "missing.sqlite", "out.jsonl"]),
    ("export from a JSONL file", ["buffer", "export", "in.jsonl", "out.jsonl"]),
    ("export unknown source", ["buffer", "export", "b.sqlite", "out.jsonl", "--source", "dream"]),
    # domain
    ("domain init bad name", ["domain", "init", "Bad Name"]),
    ("domain init empty name", ["domain", "init", ""]),
    ("domain init surrogate name", ["domain", "init", SURROGATE]),
    ("domain init output is a folder", ["domain", "init", "desk", "-o", "folder.yaml"]),
    ("domain init output not yaml", ["domain", "init", "desk", "-o", "notes.txt"]),
    ("domain init output exists", ["domain", "init", "desk", "-o", "spec.yaml"]),
    ("domain init unwritable", ["domain", "init", "desk", "-o", f"{UNWRITABLE}.yaml"]),
    ("domain check missing", ["domain", "check", "missing.yaml"]),
    ("domain check surrogate path", ["domain", "check", f"{SURROGATE}.yaml"]),
    ("domain check folder", ["domain", "check", "folder.yaml"]),
    ("domain check empty path", ["domain", "check", ""]),
    ("domain check not a spec suffix", ["domain", "check", "notes.txt"]),
    ("domain check binary", ["domain", "check", "binary.yaml"]),
    ("domain check recursive alias", ["domain", "check", "loop.yaml"]),
    ("domain list missing spec", ["domain", "list", "missing.yaml"]),
    ("domain list folder", ["domain", "list", "folder.yaml"]),
    # curriculum
    ("curriculum stats missing", ["curriculum", "stats", "missing.sqlite"]),
    ("curriculum stats folder", ["curriculum", "stats", "folder"]),
    ("curriculum stats empty path", ["curriculum", "stats", ""]),
    ("curriculum stats a buffer", ["curriculum", "stats", "b.sqlite"]),
    ("curriculum stats a JSONL file", ["curriculum", "stats", "in.jsonl"]),
    ("curriculum stats n zero", ["curriculum", "stats", "pool.sqlite", "-n", "0"]),
    ("curriculum stats n not a number", ["curriculum", "stats", "pool.sqlite", "-n", "x"]),
    ("curriculum plot onto its pool", ["curriculum", "plot", "pool.sqlite", "-o", "pool.sqlite"]),
    ("curriculum plot onto a folder", ["curriculum", "plot", "pool.sqlite", "-o", "folder"]),
    ("curriculum plot unwritable", ["curriculum", "plot", "pool.sqlite", "-o", f"{UNWRITABLE}.png"]),
    ("curriculum generate parents zero", ["curriculum", "generate", "new.sqlite", "--domain", "webshop", "--parents", "0"]),
    ("curriculum generate candidates negative", ["curriculum", "generate", "new.sqlite", "--domain", "webshop", "--candidates", "-1"]),
    ("curriculum generate n zero", ["curriculum", "generate", "new.sqlite", "--domain", "webshop", "-n", "0"]),
    ("curriculum generate unknown domain", ["curriculum", "generate", "new.sqlite", "--domain", "nope"]),
    ("curriculum generate bad url", ["curriculum", "generate", "new.sqlite", "--domain", "webshop", "--base-url", "http://127.0.0.1:99999/v1"]),
    ("curriculum generate pool is a folder", ["curriculum", "generate", "folder", "--domain", "webshop"]),
    ("curriculum generate pool is a JSONL file", ["curriculum", "generate", "in.jsonl", "--domain", "webshop"]),
    # build-sft / annotate / train
    ("build-sft missing buffer", ["build-sft", "--buffer", "missing.sqlite", "--out", "sft"]),
    ("build-sft buffer is a folder", ["build-sft", "--buffer", "folder", "--out", "sft"]),
    ("build-sft out is a file", ["build-sft", "--buffer", "b.sqlite", "--out", "notes.txt"]),
    ("build-sft out is the buffer", ["build-sft", "--buffer", "b.sqlite", "--out", "b.sqlite"]),
    ("build-sft out unwritable", ["build-sft", "--buffer", "b.sqlite", "--out", UNWRITABLE]),
    ("build-sft eval fraction above 1", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--eval-fraction", "2"]),
    ("build-sft eval fraction nan", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--eval-fraction", "nan"]),
    ("build-sft top-k negative", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--top-k", "-1"]),
    ("build-sft history window below -1", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--history-window", "-5"]),
    ("build-sft max prompt chars zero", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--max-prompt-chars", "0"]),
    ("build-sft heldout tasks missing", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--heldout-tasks", "missing.txt"]),
    ("build-sft heldout tasks folder", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--heldout-tasks", "folder"]),
    ("build-sft unknown domain", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--domain", "nope"]),
    ("build-sft surrogate domain", ["build-sft", "--buffer", "b.sqlite", "--out", "sft", "--domain", SURROGATE]),
    ("annotate missing buffer", ["annotate", "--buffer", "missing.sqlite", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]),
    ("annotate a task pool", ["annotate", "--buffer", "pool.sqlite", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]),
    ("annotate bad url", ["annotate", "--buffer", "b.sqlite", "--base-url", "http://127.0.0.1:99999/v1", "--model", "m"]),
    ("annotate empty url", ["annotate", "--buffer", "b.sqlite", "--base-url", "", "--model", "m"]),
    ("annotate concurrency zero", ["annotate", "--buffer", "b.sqlite", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "0"]),
    ("annotate limit negative", ["annotate", "--buffer", "b.sqlite", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--limit", "-1"]),
    ("annotate temperature negative", ["annotate", "--buffer", "b.sqlite", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--temperature", "-1"]),
    ("annotate max tokens zero", ["annotate", "--buffer", "b.sqlite", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--max-tokens", "0"]),
    ("train missing data", ["train", "--data", "missing", "--out", "model", "--from-scratch"]),
    ("train data is a file", ["train", "--data", "notes.txt", "--out", "model", "--from-scratch"]),
    ("train out is a file", ["train", "--data", "folder", "--out", "notes.txt", "--from-scratch"]),
    ("train batch size zero", ["train", "--data", "folder", "--out", "model", "--from-scratch", "--batch-size", "0"]),
    ("train epochs negative", ["train", "--data", "folder", "--out", "model", "--from-scratch", "--epochs", "-1"]),
    ("train learning rate nan", ["train", "--data", "folder", "--out", "model", "--from-scratch", "--lr", "nan"]),
    ("train max length zero", ["train", "--data", "folder", "--out", "model", "--from-scratch", "--max-length", "0"]),
    ("train lora rank zero", ["train", "--data", "folder", "--out", "model", "--base-model", "folder", "--lora", "--lora-r", "0"]),
    ("train both sources", ["train", "--data", "folder", "--out", "model", "--from-scratch", "--base-model", "x"]),
    # eval-fidelity
    ("eval missing data", ["eval-fidelity", "--data", "missing", "--buffer", "b.sqlite", "--out", "results"]),
    ("eval missing buffer", ["eval-fidelity", "--data", "folder", "--buffer", "missing.sqlite", "--out", "results"]),
    ("eval missing games", ["eval-fidelity", "--games", "missing", "--out", "results"]),
    ("eval out is a file", ["eval-fidelity", "--games", "folder", "--out", "notes.txt", "--baseline", "repeat-state"]),
    ("eval concurrency zero", ["eval-fidelity", "--games", "folder", "--out", "results", "--concurrency", "0"]),
    ("eval limit zero", ["eval-fidelity", "--games", "folder", "--out", "results", "--limit", "0"]),
    ("eval timeout zero", ["eval-fidelity", "--games", "folder", "--out", "results", "--timeout", "0"]),
    ("eval epsilon above 1", ["eval-fidelity", "--games", "folder", "--out", "results", "--epsilon", "1.5"]),
    ("eval bad url", ["eval-fidelity", "--games", "folder", "--out", "results", "--model", "m", "--base-url", "http://127.0.0.1:99999/v1"]),
]  # fmt: skip


def _transition(i: int) -> Transition:
    return Transition(
        domain="textworld",
        task_id=f"t{i % 2}",
        task="open the box",
        episode_id=f"ep{i // 3}",
        step=i % 3,
        state=f"Room {i}.",
        action="look",
        next_state=f"Room {i + 1}.",
        source="offline",
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files every case starts from: a buffer, its JSONL, a task pool, a recording, specs, a folder."""
    from dreamgym_env import ExperienceOutput
    from dreamgym_env._event_loop import run_sync
    from dreamgym_env.curriculum.pool import TaskPool
    from dreamgym_env.domains.spec_cli import starter_spec
    from dreamgym_env.experience.backends.base import CompletionRequest
    from dreamgym_env.experience.backends.recording import record
    from dreamgym_env.records import Task

    root = tmp_path_factory.mktemp("template")
    transitions = [_transition(i) for i in range(6)]
    with ReplayBuffer.open(root / "b.sqlite") as buffer:
        buffer.add_many(transitions)
    (root / "in.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in transitions))
    with TaskPool(str(root / "pool.sqlite")) as pool:
        pool.add_tasks([Task(task_id="t1", domain="webshop", instruction="buy shoes")])
    answer = ExperienceOutput(reasoning="r", next_state="s", done=False, success=False)
    recorder = record(ScriptedBackend([answer]), root / "rec.sqlite")
    run_sync(recorder.acomplete(CompletionRequest([{"role": "user", "content": "hi"}], {"type": "object"})))
    run_sync(recorder.aclose())
    (root / "spec.yaml").write_text(starter_spec("desk", "spec.yaml"))
    (root / "loop.yaml").write_text("name: loop\nloop: &l [*l]\n")
    (root / "binary.yaml").write_bytes(b"name: \xff\xfe\x00\x01\n")
    (root / "notes.txt").write_text("hello\n")
    (root / "folder").mkdir()
    (root / "folder.yaml").mkdir()
    return root


@pytest.fixture
def workspace(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the template as the working directory, with model servers that never start."""
    import shutil

    import dreamgym_env.serving as serving
    import dreamgym_env.serving.shipped as shipped

    root = tmp_path / "ws"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)

    def no_server(*args: object, **kwargs: object) -> None:
        raise AssertionError("a bad value got through: the command was about to start a model server")

    monkeypatch.setattr(serving, "serve_smoke_model", no_server)
    monkeypatch.setattr(shipped, "serve_shipped_model", no_server)
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (and every folder, as "dir") with the SHA-256 of its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def unchanged(root: Path, before: dict[str, str]) -> list[str]:
    """What was created or changed; SQLite's own ``-shm`` and empty ``-wal`` beside a database it read
    are not changes (any reader of a WAL database, ``mode=ro`` included, makes them)."""
    after = snapshot(root)
    changed = [name for name, digest in before.items() if after.get(name) != digest]
    created = [
        name
        for name in set(after) - set(before)
        if not (
            name.endswith("-shm")
            and name[: -len("-shm")] in before
            or name.endswith("-wal")
            and name[: -len("-wal")] in before
            and (root / name).stat().st_size == 0
        )
    ]
    return sorted(changed + created)


def run(argv: list[str]) -> tuple[int, str]:
    """``main(argv)`` with stdout and stderr as a real run has them; the exit code and stderr."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        try:
            code = main(argv)
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdout, sys.stderr = saved
    err.seek(0)
    return code, err.buffer.getvalue().decode("utf-8") if hasattr(err, "buffer") else ""


@pytest.mark.parametrize("argv", [argv for _, argv in CASES], ids=[name for name, _ in CASES])
def test_a_bad_value_is_one_clear_error_and_touches_nothing(workspace: Path, argv: list[str]) -> None:
    before = snapshot(workspace)
    code, err = run(argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0, f"exit 0 for a bad value; stderr: {err!r}"
    assert "Traceback" not in err, err
    assert lines, "no message"
    if lines[0].startswith("usage: "):  # argparse: usage, then one error line
        assert ": error: " in lines[-1] and code == 2, err
    else:
        assert len(lines) == 1, f"more than one line: {err!r}"
        assert lines[0].startswith(("error: ", "INVALID ")), err
    assert unchanged(workspace, before) == [], err


# ----------------------------------------------------------------------------- gymnasium.make / make_vec

ID = "DreamGym/WebShop-v0"
# Types pydantic converts losslessly ("10" for 10) are accepted, as from a config file; these are not.
KEYWORDS: list[tuple[str, object]] = [
    ("max_steps", 0),
    ("max_steps", -3),
    ("max_steps", "ten"),
    ("max_steps", 1.5),
    ("top_k", -1),
    ("top_k", [4]),
    ("history_window", -2),
    ("max_action_chars", 0),
    ("max_state_chars", 3),
    ("max_reasoning_chars", -1),
    ("max_admissible_actions", -1),
    ("parse_retries", -1),
    ("parse_retries", {"n": 1}),
    ("on_invalid_output", "ignore"),
    ("store_transitions", "some"),
    ("temperature", -0.5),
    ("temperature", float("nan")),
    ("top_p", 0.0),
    ("top_p", 1.5),
    ("max_tokens", 0),
    ("max_tokens", 10**30),
    ("timeout", 0),
    ("deadline", -1),
    ("max_retries", -1),
    ("max_concurrency", 0),
    ("base_url", "http://127.0.0.1:99999/v1"),
    ("base_url", "127.0.0.1:8000"),
    ("base_url", 8000),
    ("base_url", f"http://{SURROGATE}/v1"),
    ("model", 3),
    ("api_key", ["sk-secret"]),
    ("backend", "nope"),
    ("render_mode", "rgb_array"),
    ("extra_body", "x"),
    ("not_an_option", 1),
]
VECTOR_KEYWORDS: list[tuple[str, object]] = [
    ("num_envs", 0),
    ("num_envs", -1),
    ("num_envs", True),
    ("num_envs", "2"),
    ("num_envs", 2.0),
    ("group_size", 0),
    ("group_size", 3),
    ("autoreset_mode", "sometimes"),
    ("max_episode_steps", 0),
    ("max_episode_steps", "5"),
]


@pytest.mark.parametrize(("keyword", "value"), KEYWORDS, ids=[f"{k}={v!r}" for k, v in KEYWORDS])
def test_a_bad_make_keyword_is_a_package_error(keyword: str, value: object) -> None:
    kwargs = {"backend": "scripted", keyword: value}
    with pytest.raises(DreamGymError) as caught:
        gym.make(ID, **kwargs).reset(seed=0)
    assert "sk-secret" not in str(caught.value)
    with pytest.raises(DreamGymError):
        gym.make_vec(ID, num_envs=2, **kwargs).reset(seed=0)


@pytest.mark.parametrize(
    ("keyword", "value"), VECTOR_KEYWORDS, ids=[f"{k}={v!r}" for k, v in VECTOR_KEYWORDS]
)
def test_a_bad_make_vec_keyword_is_a_package_error(keyword: str, value: object) -> None:
    kwargs = {"num_envs": 2, "backend": "scripted", keyword: value}
    with pytest.raises(DreamGymError):
        gym.make_vec(ID, **kwargs).reset(seed=0)


def test_the_sweep_covers_every_command() -> None:
    """A command added later gets cases here too."""
    from dreamgym_env.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    names = set()
    for name, sub in commands.items():
        nested = [a for a in sub._actions if getattr(a, "choices", None) and a.dest.endswith("_command")]
        names |= {f"{name} {child}" for child in nested[0].choices} if nested else {name}
    covered = {" ".join(argv[:2]) if " ".join(argv[:2]) in names else argv[0] for _, argv in CASES}
    assert names <= covered, sorted(names - covered)


def test_sqlite_companions_are_the_only_exception(tmp_path: Path) -> None:
    """The snapshot's one allowance is SQLite's own files; anything else a command leaves is reported."""
    (tmp_path / "a.sqlite").write_bytes(b"x")
    before = snapshot(tmp_path)
    (tmp_path / "a.sqlite-shm").write_bytes(b"index")
    (tmp_path / "a.sqlite-wal").write_bytes(b"")
    assert unchanged(tmp_path, before) == []
    (tmp_path / "a.sqlite-wal").write_bytes(b"frame")
    (tmp_path / "b.sqlite").write_bytes(b"")
    with closing(open(tmp_path / "a.sqlite", "ab")) as f:
        f.write(b"y")
    assert unchanged(tmp_path, before) == ["a.sqlite", "a.sqlite-wal", "b.sqlite"]
