import json

import pytest

from dreamgym_env.curriculum import CurriculumSampler, TaskPool, build_report, format_report, plot_report
from dreamgym_env.domains import get_domain
from dreamgym_env.records import Task

SEEDS = get_domain("alfworld").seed_tasks()


@pytest.fixture
def pool_path(tmp_path):
    path = str(tmp_path / "pool.sqlite")
    pool = TaskPool(path)
    pool.add_tasks(SEEDS[:4])
    for r in (1, 0, 1, 0):
        pool.record_outcome(SEEDS[0].task_id, r, bool(r))
    for _ in range(4):
        pool.record_outcome(SEEDS[2].task_id, 1.0, True)
    child = Task(
        task_id="alfworld-gen-x",
        domain="alfworld",
        instruction="heat some egg and put it in countertop.",
        metadata={"task_type": "pick_heat_then_place_in_recep", "object": "egg", "receptacle": "countertop"},
        source="generated",
        parent_id=SEEDS[4].task_id,
    )
    pool.add_tasks([child], origin="generated")
    pool.close()
    return path


def test_report_counts_growth_variance_and_families(pool_path):
    with TaskPool(pool_path) as pool:
        report = build_report(pool)
    assert report.tasks == {"seed": 4, "generated": 1} and report.pool_size == 5 and report.episodes == 8
    assert report.growth == [(0, 4, 0), (8, 4, 1)]
    assert sorted(report.variances) == [0.0, 0.25]
    assert report.variance_histogram == [1, 0, 0, 0, 0, 1] and report.mixed_fraction == 0.5
    families = {f.family: f for f in report.families}
    simple = families["alfworld/pick_and_place_simple"]
    assert simple.episodes == 4 and simple.success_rate == 0.5 and simple.mean_variance == 0.25
    assert families["alfworld/pick_heat_then_place_in_recep"].generated == 1
    text = format_report(report)
    assert (
        "5 (4 seed, 1 generated)" in text
        and "| alfworld/pick_clean_then_place_in_recep | 2 | 0 | 4 | 100.0%" in text
    )
    json.dumps(report.to_dict())


def test_plot_writes_an_image(pool_path, tmp_path):
    pytest.importorskip("matplotlib")
    with TaskPool(pool_path) as pool:
        out = plot_report(build_report(pool), tmp_path / "plots" / "c.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _cli(argv):
    from dreamgym_env.cli import main

    return main(argv)


def test_cli_stats_plot_and_errors(pool_path, tmp_path, capsys):
    assert _cli(["curriculum", "stats", pool_path]) == 0
    assert "Curriculum pool" in capsys.readouterr().out
    assert _cli(["curriculum", "stats", pool_path, "--json", "--domain", "alfworld"]) == 0
    assert json.loads(capsys.readouterr().out)["pool_size"] == 5
    assert _cli(["curriculum", "stats", str(tmp_path / "missing.sqlite")]) == 1
    assert "no task pool" in capsys.readouterr().err


def test_cli_plot_writes_the_figure(pool_path, tmp_path):
    pytest.importorskip("matplotlib")
    assert _cli(["curriculum", "plot", pool_path, "-o", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").stat().st_size > 0


def test_cli_generate_without_mixed_tasks_says_so(tmp_path, capsys):
    code = _cli(
        [
            "curriculum",
            "generate",
            str(tmp_path / "new.sqlite"),
            "--domain",
            "webshop",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    assert "no task has mixed outcomes" in captured.err and "0 accepted" in captured.out
    assert CurriculumSampler(str(tmp_path / "new.sqlite"), "webshop").pool.count(origin="seed") == 12
