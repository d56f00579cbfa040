"""Fidelity cases played live from real TextWorld games: check a simulator on games of your own.

``dreamgym eval-fidelity --games DIR`` plays every game file in ``DIR`` with the real engine (an expert
episode and noisy-expert episodes, :func:`~dreamgym_env.domains.textworld.engine.play_noisy_expert`) and turns
each real transition into the request the simulated env would send for it: the same history, and
demonstrations retrieved from the replay buffer the user gives (``--buffer``), as the env retrieves
them at inference. Nothing needs to have been collected or split beforehand.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import DataFormatError
from dreamgym_env.records import Transition
from dreamgym_env.training.sft_data import DemonstrationIndex, SFTBuildConfig, TransitionCase, build_cases

_GAME_SUFFIXES = (".z8", ".ulx")
"""Compiled TextWorld game files."""


def find_games(folder: str | os.PathLike[str]) -> list[str]:
    """The game files under ``folder`` (recursively), sorted.

    Raises:
        DataFormatError: the folder holds none.
    """
    root = Path(folder)
    games = sorted(str(p) for p in root.rglob("*") if p.suffix in _GAME_SUFFIXES and p.is_file())
    if not games:
        raise DataFormatError(
            f"no TextWorld game files ({', '.join(_GAME_SUFFIXES)}) under {root}; generate some with "
            "`tw-make` or dreamgym_env.real.textworld.make_games",
            path=str(root),
        )
    return games


def _play_games(
    games: Sequence[str], episodes: int, epsilon: float, max_steps: int, seed: int, workers: int
) -> list[Transition]:
    """Real transitions of every game: one expert episode and ``episodes - 1`` noisy-expert ones each.

    The settings come from :func:`cases_from_games`, whose defaults are the only ones.
    """
    from dreamgym_env.domains.textworld.engine import play_noisy_expert
    from dreamgym_env.domains.textworld.game_file import check_game_files

    check_game_files(games)  # here, naming every bad file: a worker's engine would end the worker on one
    n = len(games)
    with ProcessPoolExecutor(max(1, min(workers, n))) as pool:
        batches = pool.map(
            play_noisy_expert, games, [episodes] * n, [epsilon] * n, [max_steps] * n, range(seed, seed + n)
        )
        return [t for batch in batches for t in batch]


def cases_from_games(
    games: Sequence[str],
    config: SFTBuildConfig,
    *,
    buffer_path: str | os.PathLike[str] | None = None,
    episodes: int = 2,
    epsilon: float = 0.4,
    max_steps: int = 30,
    seed: int = 0,
    workers: int = 2,
) -> list[TransitionCase]:
    """Play ``games`` and build one case per real transition, with the env's history and retrieval.

    Args:
        games: Game files.
        config: Prompt settings (``history_window``, ``top_k``) of the simulator under test.
        buffer_path: The replay buffer the simulator retrieves demonstrations from (``None``: none).
        episodes: Episodes per game, the first by the expert.
        epsilon: The noisy expert's share of random admissible commands.
        max_steps: Steps per episode.
        seed: Seeds the noisy experts.
        workers: Processes playing games.
    """
    transitions = _play_games(games, episodes, epsilon, max_steps, seed, workers)
    stored: list[Transition] = []
    if buffer_path is not None and config.top_k > 0:
        with ReplayBuffer.open(os.fspath(buffer_path)) as buffer:
            stored = [
                t for t in buffer.iter_transitions(domain=config.domain) if t.source in ("offline", "real")
            ]
    index = DemonstrationIndex(stored, "other_episodes") if stored else None
    try:
        learned_view = config.learned_view(get_domain(config.domain))
        return list(build_cases(transitions, index, config.top_k, learned_view=learned_view))
    finally:
        if index is not None:
            index.close()
