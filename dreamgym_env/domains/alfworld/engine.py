"""ALFWorld (real): ALFWorld's TextWorld games behind ``DreamGym/ALFWorld-v0``'s interface."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dreamgym_env.domains.alfworld.tasks import alfworld_trial_task_id, parse_alfworld_goal
from dreamgym_env.domains.textworld.engine import TextGameEngine
from dreamgym_env.episode import EpisodeEnv, WorldAttribute
from dreamgym_env.errors import DependencyNotInstalled, DreamGymError
from dreamgym_env.real.mapping import clean_game_text
from dreamgym_env.records import Task

PathLike = str | os.PathLike[str]
_TASK_LINE = re.compile(r"Your task is to: (.+)")


def _find_alfworld_games(root: PathLike | None = None, split: str | None = None) -> list[str]:
    """The ``game.tw-pddl`` files under ``root`` (default ``$ALFWORLD_DATA/json_2.1.1``), sorted.

    Args:
        root: A folder searched recursively; default ``$ALFWORLD_DATA/json_2.1.1``.
        split: A sub-folder to restrict to (``train``, ``valid_seen``, ``valid_unseen``).

    Raises:
        DreamGymError: No folder is given and ``ALFWORLD_DATA`` is unset, or no game file is found.
    """
    if root is None:
        data = os.environ.get("ALFWORLD_DATA")
        if not data:
            raise DreamGymError(
                "No ALFWorld games: pass game_files=[...] or data_path=..., or set ALFWORLD_DATA to the "
                "folder "
                "`alfworld-download` filled."
            )
        root = Path(data) / "json_2.1.1"
    base = Path(root) / split if split else Path(root)
    games = sorted(str(p) for p in base.rglob("game.tw-pddl"))
    if not games:
        raise DreamGymError(f"No game.tw-pddl files under {base}")
    return games


class ALFWorldEngine(TextGameEngine):
    """ALFWorld's games on TextWorld's engine, with ALFWorld's wrappers: ``DreamGym/ALFWorld-Real-v0``'s world.

    Args:
        game_files: The games to play; else found under ``data_path`` (default
            ``$ALFWORLD_DATA/json_2.1.1``), optionally restricted to ``split``.
        data_path: Where to look for games when none are given.
        split: A sub-folder of ``data_path`` (``train``, ``valid_seen``, ``valid_unseen``).
        expert: ``"planner"`` (the PDDL planner's plan) or ``"handcoded"`` (ALFWorld's scripted expert).
    """

    def __init__(
        self,
        game_files: Sequence[PathLike] | None = None,
        *,
        data_path: PathLike | None = None,
        split: str | None = None,
        expert: str = "planner",
    ) -> None:
        if expert not in ("planner", "handcoded"):
            raise DreamGymError(f"expert must be 'planner' or 'handcoded', got {expert!r}")
        files = list(game_files) if game_files is not None else _find_alfworld_games(data_path, split)
        self.expert = expert
        super().__init__(files, domain="alfworld")

    def _request_infos(self, textworld: Any) -> Any:
        return textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile", "expert_plan"])

    def _wrappers(self) -> list[Callable[..., Any]]:
        try:
            from alfworld.agents.environment.alfred_tw_env import (
                AlfredDemangler,
                AlfredExpert,
                AlfredExpertType,
                AlfredInfos,
            )
        except ImportError as e:
            raise DependencyNotInstalled("alfworld", "real", "DreamGym/ALFWorld-Real-v0") from e
        expert = AlfredExpertType.PLANNER if self.expert == "planner" else AlfredExpertType.HANDCODED
        return [AlfredDemangler(shuffle=False), AlfredInfos, AlfredExpert(expert_type=expert)]

    def _first_state(self, game_state: Mapping[str, Any]) -> str:
        text = clean_game_text(str(game_state.feedback))  # type: ignore[attr-defined]
        return text.replace("\n\nYour task is to:", "\nYour task is to:")

    def _make_task(self, game: str, game_state: Mapping[str, Any], state: str) -> Task:
        match = _TASK_LINE.search(state)
        instruction = match.group(1).strip() if match else ""
        metadata: dict[str, Any] = {
            **(parse_alfworld_goal(instruction) or {}),
            "game_file": game,
            "initial_observation": state,
        }
        return Task(
            task_id=alfworld_trial_task_id(Path(game).parent.name),
            domain="alfworld",
            instruction=instruction,
            metadata=metadata,
            source="alfworld:real",
        )

    def _expert_plan(self, game_state: Mapping[str, Any]) -> list[str]:
        return list(game_state.get("extra.expert_plan") or [])

    def _step_extra(self, game_state: Mapping[str, Any], score: float, won: bool) -> dict[str, Any]:
        return {"expert_plan": self._expert_plan(game_state), "score": score, "won": won}


class ALFWorldRealEnv(EpisodeEnv):
    r"""ALFWorld's real text games, observed exactly like ``DreamGym/ALFWorld-v0``.

    ## Description
    Plays ALFWorld game files (``game.tw-pddl``, ALFRED's PDDL domain run by TextWorld) with ALFWorld's
    own wrappers: object names demangled (``apple 1``), admissible commands, and the planner expert.
    The first observation is the room and the task (``You are in the middle of a room. ...\\nYour task
    is to: put a cool apple in countertop.``), the simulated domain's first-state format. It is
    ``EpisodeEnv("alfworld", ALFWorldEngine(...))``: the simulated env with the game engine as its world.

    ## Action Space / Observation Space
    ``FreeText``: ALFWorld's commands (``go to fridge 1``, ``cool apple 1 with fridge 1``).

    ## Rewards
    1.0 on the step that achieves the goal, else 0.0 (ALFWorld's own reward).

    ## Episode End
    Terminated when the goal is achieved; truncated after 50 steps.

    ## Information
    The simulated env's keys (``simulated`` False, ``source`` "real"), plus ``expert_plan`` (the
    planner's remaining commands), ``score``, ``won`` and ``game_file``.

    ## Arguments
    ``game_files``: the ``game.tw-pddl`` files to play; else found under ``data_path`` (default
    ``$ALFWORLD_DATA/json_2.1.1``), optionally restricted to ``split``. ``expert``: ``"planner"``
    (default; the PDDL planner's plan) or ``"handcoded"`` (ALFWorld's scripted expert; it reads the
    game's facts). Reset options: ``game_file`` or ``game_index``. Other keywords are
    :class:`~dreamgym_env.episode.EpisodeEnv`'s.
    """

    world: ALFWorldEngine

    def __init__(
        self,
        game_files: Sequence[PathLike] | None = None,
        *,
        data_path: PathLike | None = None,
        split: str | None = None,
        expert: str = "planner",
        **kwargs: Any,
    ) -> None:
        engine = ALFWorldEngine(game_files, data_path=data_path, split=split, expert=expert)
        super().__init__(engine.domain, engine, **kwargs)

    game_files = WorldAttribute[list[str]]("The games reset draws from.")
    expert = WorldAttribute[str]("""``"planner"`` or ``"handcoded"``: who writes ``info["expert_plan"]``.""")
