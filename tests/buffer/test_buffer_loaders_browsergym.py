"""The BrowserGym/AgentLab experiment-folder loader, on folders written here (no browser needed)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import pickle
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamgym_env.buffer.loaders import detect_format, import_files, iter_records
from dreamgym_env.buffer.loaders.base import LoadIssue, Record
from dreamgym_env.buffer.replay_buffer import ReplayBuffer
from dreamgym_env.errors import DataFormatError


@dataclasses.dataclass
class StepInfo:  # pickled under AgentLab's name, read back without AgentLab installed
    step: int
    obs: dict[str, Any] | None
    reward: float = 0.0
    raw_reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    action: str | None = None
    agent_info: dict[str, Any] = dataclasses.field(default_factory=dict)


def _agentlab_pickle(value: Any) -> bytes:
    names = ("agentlab", "agentlab.experiments", "agentlab.experiments.loop")
    for name in names:
        sys.modules[name] = types.ModuleType(name)
    sys.modules[names[-1]].StepInfo = StepInfo  # type: ignore[attr-defined]
    StepInfo.__module__, StepInfo.__qualname__ = names[-1], "StepInfo"
    try:
        return pickle.dumps(value)
    finally:
        for name in names:
            del sys.modules[name]
        StepInfo.__module__ = __name__


def _obs(text: str, url: str = "file:///opt/miniwob/html/miniwob/click-button.html") -> dict[str, Any]:
    return {
        "goal": 'Click on the "no" button.',
        "url": url,
        "open_pages_titles": ["Click Button Task"],
        "active_page_index": np.int64(0),
        "axtree_txt": text,
        "screenshot": np.zeros((4, 4, 3), dtype=np.uint8),
    }


def _agentlab_run(root: Path, name: str = "2024-05-01_GenericAgent_on_miniwob.click-button_7") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    steps = [
        StepInfo(0, _obs("RootWebArea 'Click Button Task'\n\t[13] button 'no'"), action="click('13')"),
        StepInfo(1, _obs("RootWebArea 'Click Button Task'"), reward=1.0, terminated=True),
    ]
    for step in steps:
        (folder / f"step_{step.step}.pkl.gz").write_bytes(gzip.compress(_agentlab_pickle(step)))
    (folder / "summary_info.json").write_text(json.dumps({"n_steps": 1, "cum_reward": 1.0}))
    return folder


def test_agentlab_step_pickles_become_transitions_in_the_live_format(tmp_path: Path) -> None:
    _agentlab_run(tmp_path)
    assert detect_format(tmp_path) == "browsergym"
    (record,) = list(iter_records([tmp_path]))
    assert isinstance(record, Record)
    (t,) = record.transitions
    assert t.state.splitlines() == [
        "Tab 0 (current): Click Button Task",
        "URL: http://localhost/miniwob/click-button.html",  # the display URL the simulator uses
        "RootWebArea 'Click Button Task'",
        "\t[13] button 'no'",
    ]
    assert (t.action, t.reward, t.done, t.success, t.domain) == ("click('13')", 1.0, True, True, "miniwob")
    assert t.task_id == "miniwob.click-button-7" and t.task == 'Click on the "no" button.'


def test_a_pickle_that_would_run_code_is_refused_and_the_rest_imports(tmp_path: Path) -> None:
    _agentlab_run(tmp_path, "a_on_miniwob.click-button_1")
    bad = tmp_path / "b_on_miniwob.click-button_2"
    bad.mkdir()

    class Evil:
        def __reduce__(self) -> Any:
            return (os.system, ("echo owned > " + str(tmp_path / "owned"),))

    (bad / "step_0.pkl.gz").write_bytes(gzip.compress(pickle.dumps({"step": 0, "obs": Evil()})))
    items = list(iter_records([tmp_path], "browsergym"))
    issues = [i for i in items if isinstance(i, LoadIssue)]
    assert len(issues) == 1 and "does not load" in issues[0].message and issues[0].path == str(bad)
    assert not (tmp_path / "owned").exists()
    with ReplayBuffer.open(":memory:") as buffer:
        report = import_files(buffer, [tmp_path], "browsergym")
    assert (report.records, report.stored, len(report.issues)) == (1, 1, 1)


def test_gap_in_step_numbers_and_missing_action_are_issues(tmp_path: Path) -> None:
    folder = _agentlab_run(tmp_path)
    (folder / "step_1.pkl.gz").rename(folder / "step_2.pkl.gz")
    (issue,) = list(iter_records([folder], "browsergym"))
    assert isinstance(issue, LoadIssue) and "without gaps" in issue.message
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataFormatError, match="holds no"):
        list(iter_records([empty], "browsergym"))


@pytest.mark.parametrize("summary", [{"task_name": "webarena.310", "goal": "Find the cheapest item"}])
def test_webarena_runs_go_to_the_webarena_domain(tmp_path: Path, summary: dict[str, Any]) -> None:
    folder = _agentlab_run(tmp_path, "run")
    (folder / "summary_info.json").write_text(json.dumps(summary))
    (record,) = list(iter_records([folder], "browsergym"))
    assert isinstance(record, Record)
    assert {t.domain for t in record.transitions} == {"webarena"}
    assert record.transitions[0].task == "Find the cheapest item"
