"""A damaged game file is refused by reading it, before the engine, which ends the process on one, loads it."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from dreamgym_env.cli import main
from dreamgym_env.domains.textworld.game_file import check_game_file, check_game_files
from dreamgym_env.errors import DataFormatError


def _z8(size: int = 4096) -> bytes:
    """A Z-machine version 8 story file as a compiler writes it: length and checksum in the header."""
    body = bytearray(size)
    body[0] = 8
    for i in range(0x40, size):
        body[i] = (i * 7) % 251
    struct.pack_into(">H", body, 0x1A, size // 8)
    struct.pack_into(">H", body, 0x1C, sum(body[0x40:size]) % 0x10000)
    return bytes(body)


def _ulx(size: int = 1024) -> bytes:
    """A Glulx game file: magic, EXTSTART (its length) and the sum of its words in the header."""
    body = bytearray(size)
    body[0:4] = b"Glul"
    struct.pack_into(">IIIII", body, 4, 0x00030102, 256, size, size, 512)
    for i in range(36, size):
        body[i] = (i * 13) % 253
    words = struct.unpack(f">{size // 4}I", body)
    struct.pack_into(">I", body, 32, sum(words) % 2**32)
    return bytes(body)


@pytest.mark.parametrize("name, data", [("g.z8", _z8()), ("g.ulx", _ulx()), ("g.z8", _z8() + b"\0" * 300)])
def test_a_whole_game_file_passes(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    check_game_file(path)


@pytest.mark.parametrize(
    "name, data, reason",
    [
        ("g.z8", _z8()[:3000], "truncated"),
        ("g.z8", _z8()[:40], "truncated"),
        ("g.z8", b"", "empty"),
        ("g.z8", b"not a game at all, just text\n" * 10, "not a Z-machine story file"),
        ("g.z8", _z8()[:2000] + b"\xff" + _z8()[2001:], "checksum"),
        ("g.ulx", _ulx()[:700], "truncated"),
        ("g.ulx", b"Glux" + _ulx()[4:], "not a Glulx game file"),
        ("g.ulx", _ulx()[:600] + b"\x01" + _ulx()[601:], "checksum"),
    ],
)
def test_a_damaged_game_file_is_a_data_format_error_naming_it(
    tmp_path: Path, name: str, data: bytes, reason: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataFormatError, match=reason) as info:
        check_game_file(path)
    assert info.value.path == str(path) and str(path) in str(info.value)


def test_every_damaged_file_of_a_list_is_named(tmp_path: Path) -> None:
    (tmp_path / "good.z8").write_bytes(_z8())
    (tmp_path / "cut.z8").write_bytes(_z8()[:100])
    (tmp_path / "text.ulx").write_text("hello")
    with pytest.raises(DataFormatError, match="2 of the 3 game files") as info:
        check_game_files([tmp_path / "good.z8", tmp_path / "cut.z8", tmp_path / "text.ulx"])
    assert "cut.z8" in str(info.value) and "text.ulx" in str(info.value) and "good.z8" not in str(info.value)


def test_eval_fidelity_on_a_folder_of_bad_games_names_them(tmp_path: Path, capsys) -> None:
    games = tmp_path / "games"
    games.mkdir()
    (games / "cut.z8").write_bytes(_z8()[:100])
    (games / "notes.ulx").write_text("not a game")
    code = main(
        ["eval-fidelity", "--games", str(games), "--out", str(tmp_path / "r"), "--baseline", "repeat-state"]
    )
    out = capsys.readouterr()
    assert code != 0 and "BrokenProcessPool" not in out.out + out.err
    assert "cut.z8" in out.out + out.err and "notes.ulx" in out.out + out.err


@pytest.mark.real
def test_a_truncated_real_game_raises_and_the_process_lives_on(tmp_path: Path) -> None:
    """Before the check, Jericho's Frotz printed ``Fatal error: Story file read error`` and exited."""
    pytest.importorskip("textworld")
    from dreamgym_env.domains.textworld.engine import make_games

    (game,) = make_games(tmp_path / "games", 1, seed=11, challenge="tw-coin_collector", settings={"level": 2})
    cut = tmp_path / "cut" / Path(game).name
    cut.parent.mkdir()
    cut.write_bytes(Path(game).read_bytes()[:100_000])
    Path(game).with_suffix(".json").replace(cut.with_suffix(".json"))
    script = (
        "from dreamgym_env.domains.textworld.engine import tasks_from_games\n"
        "from dreamgym_env.errors import DataFormatError\n"
        f"try:\n    tasks_from_games([{str(cut)!r}])\n"
        "except DataFormatError as e:\n    print('refused:', e)\n"
        "print('still running')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "refused:" in done.stdout and str(cut) in done.stdout and "truncated" in done.stdout, done
    assert "still running" in done.stdout and done.returncode == 0
