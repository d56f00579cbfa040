"""docs/own_simulator.md: the path from your own episodes to a served, measured simulator.

The page's tables are the committed result's; the path itself runs end to end at a small budget in the
integration test (the real vLLM server, the adapter merged into its PyPI-built base).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tests._scripts import ROOT, load_script

RESULT = ROOT / "docs" / "results" / "own_simulator_alfworld.json"
DOCS = ROOT / "docs" / "own_simulator.md"
DATA = ROOT.parent / "shared" / "data" / "alfworld" / "react_alfworld_3prompts.json"


def test_the_page_quotes_the_committed_result_and_its_commands() -> None:
    bench = load_script("benchmarks/bench_own_simulator.py")
    result = json.loads(RESULT.read_text(encoding="utf-8"))
    docs = DOCS.read_text(encoding="utf-8")
    assert bench.markdown(result) in docs, (
        "regenerate the tables: python benchmarks/bench_own_simulator.py --markdown "
        + str(RESULT.relative_to(ROOT))
    )
    for name, command in result["commands"].items():
        assert command in docs, f"the page's {name} command is not the one measured: {command}"
    assert set(result["fidelity"]) == {"model", "repeat-state", "nearest-transition"}
    assert {row["transitions"] for row in result["fidelity"].values()} == {result["examples"]["eval"]}
    assert sum(result["played"]["answered_by"].values()) == result["played"]["steps"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.integration
@pytest.mark.skipif(not DATA.exists(), reason="shared benchmark data not present")
def test_the_path_runs_end_to_end_at_a_small_budget(tmp_path) -> None:
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    pytest.importorskip("vllm")
    out = tmp_path / "result.json"
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "bench_own_simulator.py"),
        "--work",
        str(tmp_path / "work"),
        "--out",
        str(out),
        "--max-steps",
        "2",
        "--episodes",
        "1",
        "--port",
        str(_free_port()),
    ]
    subprocess.run(command, check=True, cwd=ROOT, timeout=1500)
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result["seconds"]) == {"import", "build-sft", "train", "serve", "eval-fidelity", "play"}
    model = result["fidelity"]["model"]
    assert model["transitions"] == result["examples"]["eval"] > 0
    assert (
        0.0 <= model["parse_failure_rate"] <= 1.0
    )  # two steps teach no form: only that it was served and asked
    played = result["played"]
    assert played["env_id"] == "DreamGym/ALFWorld-v0"
    assert played["steps"] > 0 or "ResponseFormatError" in str(
        played["error"]
    )  # the env ran, or said why not
