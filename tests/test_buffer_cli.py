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
from dreamgym_env.types import Transition


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
