"""``dreamgym buffer``: reading commands never write, and export never destroys what it reads."""

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.cli import main
from dreamgym_env.errors import StoreError
from dreamgym_env.records import Transition


def tr(i):
    return Transition(
        domain="webshop",
        task_id="t",
        task="buy shoes",
        episode_id=f"ep{i // 3}",
        step=i % 3,
        state=f"[search results] item {i}",
        action=f"click[item {i}]",
        next_state=f"[item page] item {i}",
    )


def files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def buffer_file(tmp_path):
    """A closed buffer file of 6 transitions, in a folder of its own."""
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "b.sqlite"
    with ReplayBuffer.open(path) as buffer:
        buffer.add_many([tr(i) for i in range(6)])
    return path


def rows(path) -> int:
    with closing(sqlite3.connect(path)) as conn:  # closed, so SQLite removes its -wal and -shm files
        return conn.execute("SELECT COUNT(*) FROM transitions").fetchone()[0]


def test_export_onto_its_own_buffer_is_refused_before_anything_is_opened(buffer_file, capsys):
    """Measured before the fix: the buffer was left at 0 bytes, every row lost, exit 1."""
    before = files(buffer_file.parent)
    assert main(["buffer", "export", str(buffer_file), str(buffer_file)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "is the buffer being exported" in err
    assert files(buffer_file.parent) == before and rows(buffer_file) == 6
    # The same file under another name (a relative path, a symlink) is the same file.
    link = buffer_file.parent / "link.sqlite"
    link.symlink_to(buffer_file)
    before = files(buffer_file.parent)
    assert main(["buffer", "export", str(buffer_file), str(link)]) == 1
    assert "is the buffer being exported" in capsys.readouterr().err
    assert files(buffer_file.parent) == before and rows(buffer_file) == 6


def test_export_never_replaces_a_sqlite_database(buffer_file, tmp_path, capsys):
    other = tmp_path / "other.sqlite"
    with ReplayBuffer.open(other) as buffer:
        buffer.add_many([tr(i) for i in range(2)])
    before = files(tmp_path)
    assert main(["buffer", "export", str(buffer_file), str(other)]) == 1
    err = capsys.readouterr().err
    assert "is a SQLite database" in err and "JSONL" in err
    assert files(tmp_path) == before


def test_export_writes_a_temporary_file_and_renames_it(buffer_file, tmp_path, monkeypatch):
    """A failure part-way leaves the earlier export whole and no temporary file behind."""
    out = tmp_path / "out.jsonl"
    out.write_text("earlier export\n")
    with ReplayBuffer.open(buffer_file) as buffer:

        def broken(**kwargs):
            yield tr(0)
            raise StoreError("could not read: disk I/O error")

        monkeypatch.setattr(buffer.store, "iter_transitions", broken)
        with pytest.raises(StoreError, match="disk I/O error"):
            buffer.export_jsonl(out)
        assert out.read_text() == "earlier export\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out.jsonl"]
        monkeypatch.undo()
        assert buffer.export_jsonl(out) == 6
    assert [json.loads(line)["action"] for line in out.read_text().splitlines()] == [
        f"click[item {i}]" for i in range(6)
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out.jsonl"]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("missing/x.jsonl", "does not exist"),  # measured before: FileNotFoundError traceback
        (".", "is a directory"),
        ("", "empty"),
        ("/dev/null", "not a regular file"),
    ],
)
def test_export_to_a_path_it_cannot_write_is_one_line_and_writes_nothing(
    buffer_file, tmp_path, monkeypatch, capsys, output, message
):
    monkeypatch.chdir(tmp_path)
    before = files(tmp_path)
    assert main(["buffer", "export", str(buffer_file), output]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert files(tmp_path) == before


def tables(path) -> set[str]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def untouched(folder: Path, before: dict[str, str]) -> bool:
    """Every file as it was; new files only SQLite's own beside a WAL database it had to read, holding nothing.

    A reader of a WAL database (``mode=ro`` included) makes the ``-shm`` index and an empty ``-wal`` when
    no other connection has; they change no row and SQLite reuses them.
    """
    after = files(folder)
    new = set(after) - set(before)
    return all(after.get(name) == digest for name, digest in before.items()) and all(
        name.endswith("-shm") or (name.endswith("-wal") and (folder / name).stat().st_size == 0)
        for name in new
    )


def _task_pool(path):
    from dreamgym_env.curriculum.pool import TaskPool
    from dreamgym_env.records import Task

    with TaskPool(str(path)) as pool:
        pool.add_tasks([Task(task_id="t1", domain="webshop", instruction="buy shoes")])


def _recording(path):
    from dreamgym_env import ExperienceOutput, ScriptedBackend
    from dreamgym_env._event_loop import run_sync
    from dreamgym_env.experience.backends.base import CompletionRequest
    from dreamgym_env.experience.backends.recording import record

    answer = ExperienceOutput(reasoning="r", next_state="s", done=False, success=False)
    backend = record(ScriptedBackend([answer]), path)
    request = CompletionRequest(messages=[{"role": "user", "content": "hi"}], json_schema={"type": "object"})
    run_sync(backend.acomplete(request))
    run_sync(backend.aclose())


def _other_database(path):
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.commit()


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (_task_pool, "a curriculum task pool"),
        (_recording, "a recording of experience-model calls"),
        (_other_database, "a SQLite database with the tables notes"),
    ],
)
@pytest.mark.parametrize("command", ["stats", "search", "export"])
def test_reading_commands_refuse_a_file_that_is_not_a_buffer_and_write_nothing(
    tmp_path, capsys, make, kind, command
):
    """Measured before the fix: `buffer stats` on a task pool or recording added the buffer tables, exit 0."""
    path = tmp_path / "other.sqlite"
    make(path)
    before, before_tables = files(tmp_path), tables(path)
    argv = {
        "stats": ["stats", str(path)],
        "search": ["search", str(path), "--state", "s", "--action", "a"],
        "export": ["export", str(path), str(tmp_path / "out.jsonl")],
    }[command]
    assert main(["buffer", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"{path} is not a replay buffer: it is {kind}" in err, err
    assert tables(path) == before_tables
    assert untouched(tmp_path, before)


def test_reading_with_another_embedder_is_refused_instead_of_reembedding(buffer_file, capsys):
    """Measured before the fix: `stats --dim 64` re-embedded all 6 rows and rewrote the stored embedder."""
    before = files(buffer_file.parent)
    assert main(["buffer", "stats", str(buffer_file), "--dim", "64"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "hashing-v2:dim=256" in err and "hashing-v2:dim=64" in err and "--dim" in err
    assert untouched(buffer_file.parent, before)
    with closing(sqlite3.connect(f"file:{buffer_file}?mode=ro", uri=True)) as conn:
        assert (
            conn.execute("SELECT value FROM meta WHERE key = 'embedder'")
            .fetchone()[0]
            .startswith("hashing-v2:dim=256")
        )


def test_reading_commands_leave_the_buffer_as_it_was(buffer_file, tmp_path, capsys):
    before = files(buffer_file.parent)
    assert main(["buffer", "stats", str(buffer_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["transitions"] == 6
    assert main(["buffer", "search", str(buffer_file), "--state", "item 2", "--action", "click[item 2]"]) == 0
    assert main(["buffer", "export", str(buffer_file), str(tmp_path / "out.jsonl")]) == 0
    assert untouched(buffer_file.parent, before)


def test_a_read_only_buffer_refuses_writes(buffer_file):
    before = files(buffer_file.parent)
    with ReplayBuffer.open(buffer_file, read_only=True) as buffer:
        assert len(buffer) == 6 and buffer.retrieve(tr(4).state, tr(4).action, 1)[0].action == "click[item 4]"
        with pytest.raises(StoreError, match="read-only"):
            buffer.add(tr(100))
    assert untouched(buffer_file.parent, before)
    with pytest.raises(StoreError, match="does not exist"):
        ReplayBuffer.open(buffer_file.parent / "missing.sqlite", read_only=True)
    assert not (buffer_file.parent / "missing.sqlite").exists()


@pytest.mark.parametrize("k", ["-1", "0", "x", "1.5"])
def test_search_refuses_a_k_that_is_not_a_positive_int(buffer_file, capsys, k):
    """Measured before the fix: `-k -1` exited 0 with "no transitions match"."""
    with pytest.raises(SystemExit) as caught:
        main(["buffer", "search", str(buffer_file), "--state", "s", "--action", "a", "-k", k])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "argument -k: must be a positive integer" in err and "Traceback" not in err


def _two_runs_of_one_game(path: Path) -> Path:
    """JSONL of two 3-step episodes of one game whose first step is the same (state, action, next state)."""
    lines = []
    for episode in ("ep-a", "ep-b"):
        for step in range(3):
            same = step == 0  # both runs open the same way; then they part
            lines.append(
                Transition(
                    domain="alfworld",
                    task_id="put-0",
                    task="put a cup in the sink",
                    episode_id=episode,
                    step=step,
                    state="You are in a room." if same else f"{episode} state {step}",
                    action="go to sinkbasin 1" if same else f"{episode} action {step}",
                    next_state="On the sinkbasin 1, you see nothing." if same else f"{episode} next {step}",
                    source="offline",
                ).model_dump_json()
            )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_keeps_every_step_of_every_episode_and_says_what_it_dropped(tmp_path, capsys):
    """Measured before: the default content rule stored 5 of 6 (ep-b lost its step 0) and said only
    "1 duplicates skipped", nothing of the gap nor of how to keep it."""
    source = _two_runs_of_one_game(tmp_path / "runs.jsonl")
    buffer = tmp_path / "b.sqlite"
    assert main(["buffer", "import", str(buffer), str(source), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "6 transitions read: 6 stored, 0 dropped as duplicates" in out
    assert rows(buffer) == 6
    with ReplayBuffer.open(buffer, read_only=True, create=False) as opened:
        steps = sorted((t.episode_id, t.step) for t in opened.iter_transitions())
    assert steps == [(e, s) for e in ("ep-a", "ep-b") for s in range(3)]  # both histories whole
    # Importing the same file again adds nothing and says why.
    assert main(["buffer", "import", str(buffer), str(source), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "6 transitions read: 0 stored, 6 dropped as duplicates" in out and "already stored" in out
    assert rows(buffer) == 6
    # The content rule, asked for: one copy of the shared step, and the line says what that costs and
    # how to keep them.
    other = tmp_path / "c.sqlite"
    assert main(["buffer", "import", str(other), str(source), "--quiet", "--dedup", "content"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "6 transitions read: 5 stored, 1 dropped as duplicates" in out
    assert "--dedup episode" in out and "gaps" in out
    assert rows(other) == 5
