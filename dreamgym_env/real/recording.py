"""Recording real browser episodes as AgentLab-style experiment folders, which the buffer imports.

One folder per episode, laid out as AgentLab lays out an experiment, so one loader
(:mod:`dreamgym_env.buffer.loaders.browsergym`) reads both a user's AgentLab/BrowserGym runs and the
real wrappers' own:

- ``step_<n>.pkl.gz``: the ``n``-th BrowserGym observation and what followed it, a gzipped pickle of
  a plain dict with AgentLab's ``StepInfo`` fields (``step``, ``obs``, ``reward``, ``raw_reward``,
  ``terminated``, ``truncated``, ``action`` chosen from this observation, ``None`` on the last step,
  ``agent_info``, ``task_info``);
- ``summary_info.json``: the episode so far (``n_steps``, ``cum_reward``, ``terminated``,
  ``truncated``, ``err_msg``) plus this package's ``task_name``, ``task_id``, ``goal`` and
  ``task_metadata``.

The screenshot is left out unless asked for (it is most of a step's size and no state needs it).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import uuid
from pathlib import Path
from typing import Any

from dreamgym_env.records import Task

SUMMARY_FILE = "summary_info.json"
"""The episode summary AgentLab writes beside the step pickles."""


def _step_file(folder: Path, step: int) -> Path:
    """Where step ``step`` of an episode folder is stored (AgentLab's name)."""
    return folder / f"step_{step}.pkl.gz"


class EpisodeRecorder:
    """Writes one real episode's observations and actions, step by step, as they happen.

    Every step is on disk as soon as it is played (an interrupted run keeps what it played).

    Args:
        root: The folder that receives one sub-folder per episode.
        task_name: BrowserGym's task name (``miniwob.click-button``), which tells the loader the domain.
        task: The episode's task (its id, instruction and metadata go to the summary).
        obs: BrowserGym's first observation.
        screenshots: Keep each observation's screenshot.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        task_name: str,
        task: Task,
        obs: dict[str, Any],
        *,
        screenshots: bool = False,
    ) -> None:
        slug = re.sub(r"[^\w.-]+", "_", task.task_id)[:80]
        self.folder = Path(root) / f"{slug}_{uuid.uuid4().hex[:8]}"
        self.folder.mkdir(parents=True, exist_ok=False)
        self.screenshots = screenshots
        self.task_name = task_name
        self.task = task
        self.cum_reward = 0.0
        self._step = 0
        self._last: dict[str, Any] = self._entry(obs, 0.0, False, False)
        self._write_step()
        self._write_summary()

    def _entry(self, obs: dict[str, Any], reward: float, terminated: bool, truncated: bool) -> dict[str, Any]:
        kept = {k: v for k, v in obs.items() if self.screenshots or k not in ("screenshot", "som_screenshot")}
        return {
            "step": self._step,
            "obs": kept,
            "reward": float(reward),
            "raw_reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "action": None,
            "agent_info": {},
            "task_info": {},
        }

    def step(
        self, action: str, obs: dict[str, Any], reward: float, terminated: bool, truncated: bool, info: Any
    ) -> None:
        """Record ``action`` on the current step and the observation it led to as the next step."""
        self._last["action"] = action
        self._write_step()
        self._step += 1
        self.cum_reward += float(reward)
        self._last = self._entry(obs, reward, terminated, truncated)
        if isinstance(info, dict):
            self._last["task_info"] = dict(info.get("task_info") or {})
        self._write_step()
        self._write_summary()

    def _write_step(self) -> None:
        with gzip.open(_step_file(self.folder, self._last["step"]), "wb") as f:
            pickle.dump(self._last, f)

    def _write_summary(self) -> None:
        summary = {
            "n_steps": self._step,
            "cum_reward": self.cum_reward,
            "terminated": self._last["terminated"],
            "truncated": self._last["truncated"],
            "err_msg": None,
            "task_name": self.task_name,
            "task_id": self.task.task_id,
            "goal": self.task.instruction,
            "task_metadata": self.task.metadata,
        }
        (self.folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
