"""Imports under bad input: all or nothing, non-finite and out-of-range values, encodings, episode
boundaries; and the read-only commands on a missing file."""

import json

import pytest

from dreamgym_env.buffer import ReplayBuffer, import_files, iter_records
from dreamgym_env.buffer.loaders import LoadIssue
from dreamgym_env.cli import main
from dreamgym_env.errors import DataFormatError
from dreamgym_env.records import Transition


def line(episode, step, **kw):
    base = {
        "domain": "d",
        "task_id": "t",
        "task": "x",
        "episode_id": episode,
        "step": step,
        "state": f"s {episode} {step}",
        "action": f"a {episode} {step}",
        "next_state": f"n {episode} {step}",
    }
    return json.dumps({**base, **kw}, ensure_ascii=False)


def write(path, lines, encoding="utf-8"):
    path.write_text("".join(x + "\n" for x in lines), encoding=encoding)
    return path


def _split(path):
    items = list(iter_records([path], "jsonl"))
    records = [i for i in items if not isinstance(i, LoadIssue)]
    return records, [i for i in items if isinstance(i, LoadIssue)]


@pytest.mark.parametrize("reward", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_rewards_are_malformed_records_not_duplicates(tmp_path, reward):
    path = tmp_path / "r.jsonl"
    bad = line("e2", 0).replace('"step": 0', f'"step": 0, "reward": {reward}')
    write(path, [line("e1", 0), bad, line("e3", 0)])
    with ReplayBuffer() as buffer:
        report = import_files(buffer, [path])
        assert (report.stored, report.duplicates, len(report.issues)) == (2, 0, 1)
        assert report.issues[0].line == 2 and "reward" in report.issues[0].message
        assert "finite" in report.issues[0].message
        with pytest.raises(DataFormatError, match=r"r\.jsonl:2: .*reward"):
            import_files(buffer, [path], strict=True)


def test_adding_a_non_finite_reward_is_an_error_not_a_silent_drop():
    t = Transition(domain="d", task_id="t", task="x", episode_id="e", step=0, state="s", action="a",
                   next_state="n", reward=float("inf"))  # fmt: skip
    with ReplayBuffer() as buffer:
        with pytest.raises(DataFormatError, match="reward"):
            buffer.add_many([t])
        with pytest.raises(DataFormatError, match="reward"):
            buffer.add(t.model_copy(update={"reward": float("nan")}))
        assert len(buffer) == 0


def test_huge_step_in_strict_mode_writes_nothing_and_names_the_line(tmp_path):
    path = tmp_path / "big.jsonl"
    lines = [line(f"e{i // 4}", i % 4) for i in range(3000)]
    lines.append(line("last", 2**70))
    write(path, lines)
    with ReplayBuffer() as buffer:
        with pytest.raises(DataFormatError, match=r"big\.jsonl:3001: .*step") as info:
            import_files(buffer, [path], strict=True)
        assert info.value.line == 3001
        assert len(buffer) == 0
        report = import_files(buffer, [path])  # not strict: the bad record is skipped, the rest stored
        assert report.stored == 3000 and [i.line for i in report.issues] == [3001]


def test_an_import_that_fails_part_way_writes_nothing(tmp_path, store_location):
    good = write(tmp_path / "a.jsonl", [line(f"e{i // 4}", i % 4) for i in range(3000)])
    latin = tmp_path / "b.jsonl"
    latin.write_bytes((line("f", 0, state="caf\u00e9") + "\n").encode("latin-1"))
    with ReplayBuffer.open(store_location) as buffer:
        with pytest.raises(DataFormatError, match=r"b\.jsonl:1: .*UTF-8"):
            import_files(buffer, [good, latin])
        assert len(buffer) == 0 and len(buffer.index) == 0
        assert import_files(buffer, [good]).stored == 3000
        assert len(buffer.index) == 3000
    with ReplayBuffer.open(store_location) as again:
        assert len(again) == len(again.index) == 3000


def test_encodings(tmp_path):
    lines = [line("e", 0, state="caf\u00e9"), line("e", 1)]
    bom = write(tmp_path / "bom.jsonl", lines, encoding="utf-8-sig")
    records, issues = _split(bom)
    assert issues == [] and [t.state for t in records[0].transitions][0] == "caf\u00e9"
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b"".join((x + "\n").encode("latin-1") for x in [line("e", 0), lines[0]]))
    with pytest.raises(DataFormatError, match=r"latin\.jsonl:2: not UTF-8") as info:
        _split(latin)
    assert info.value.line == 2
    for encoding in ("utf-16", "utf-16-le"):
        wide = write(tmp_path / f"{encoding}.jsonl", lines, encoding=encoding)
        with pytest.raises(DataFormatError, match="UTF-16"):
            _split(wide)
        with ReplayBuffer() as buffer, pytest.raises(DataFormatError, match="UTF-16"):
            import_files(buffer, [wide])  # format detection reads the file too
    assert import_files(ReplayBuffer(), [bom]).stored == 2


def test_a_bad_first_line_drops_its_own_episode_not_the_one_before(tmp_path):
    path = write(
        tmp_path / "e.jsonl",
        [
            line("A", 0),
            line("A", 1),
            line("B", 0, reward="lots"),  # B's first line is bad
            line("B", 1),
            line("C", 0),
        ],
    )
    records, issues = _split(path)
    assert [[(t.episode_id, t.step) for t in r.transitions] for r in records] == [
        [("A", 0), ("A", 1)],
        [("C", 0)],
    ]
    assert [i.line for i in issues] == [3] and "'B'" in issues[0].message


@pytest.mark.parametrize("command", [["stats"], ["search", "--state", "s", "--action", "a"], ["export", "o"]])
def test_read_only_commands_on_a_missing_file_fail_and_create_nothing(tmp_path, capsys, command):
    db = tmp_path / "missing.sqlite"
    argv = ["buffer", command[0], str(db), *command[1:]]
    if command[0] == "export":
        argv[-1] = str(tmp_path / "out.jsonl")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(db) in err and "does not exist" in err
    assert list(tmp_path.iterdir()) == []


def test_read_only_open_of_a_missing_file_is_an_error(tmp_path):
    from dreamgym_env.errors import StoreError

    with pytest.raises(StoreError, match="does not exist"):
        ReplayBuffer.open(tmp_path / "nope.sqlite", create=False)
    assert not (tmp_path / "nope.sqlite").exists()
    ReplayBuffer.open(tmp_path / "yes.sqlite").close()
    ReplayBuffer.open(tmp_path / "yes.sqlite", create=False).close()
