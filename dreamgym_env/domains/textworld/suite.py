"""A fixed benchmark of real TextWorld games: varied maps, objects and quests, split into train and held out.

Every game is a pure function of its recipe and seed, so two machines that build the suite with the same
arguments play the same games. Recipes are drawn per game from four generators, each at several
difficulties:

* ``custom`` (what ``tw-make custom`` builds): 1-6 rooms, 2-10 objects, quests of 1-4 steps;
* ``tw-treasure_hunter`` levels 1-20 (find an object, later among distractors);
* ``tw-coin_collector`` levels 1-15 (walk a maze to a coin);
* ``tw-simple`` with every reward density and goal style (a fixed map, varied quests).

Held-out games draw their seeds from a range training games never use, so growing the training set
never changes which games are held out. Offline data (the experience model's training set, the replay
buffer) must come from the training games only; held-out games measure generalisation.

    >>> suite = build_suite("runs/suite", train_games=256, heldout_games=40)   # doctest: +SKIP
    >>> suite.train[0].path, suite.heldout[0].recipe                           # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from dreamgym_env.domains.textworld.engine import make_games
from dreamgym_env.errors import ConfigError, DataFormatError

__all__ = ["HELDOUT_SEED_OFFSET", "GameEntry", "GameSuite", "build_suite", "load_suite"]

_SUITE_FILE = "suite.json"
HELDOUT_SEED_OFFSET = 1_000_000
"""Held-out game ``i`` uses seed ``seed + HELDOUT_SEED_OFFSET + i``; training game ``i`` uses ``seed + i``."""

Split = Literal["train", "heldout"]
Recipe = tuple[str, dict[str, Any]]
"""A generator and its settings: ``("tw-coin_collector", {"level": 3})``."""
Job = tuple[Split, int, int, Recipe | None]
"""One game to make: its split, index, seed and recipe (``None``: the seed's own, :func:`recipe_for`)."""


@dataclass(frozen=True)
class GameEntry:
    """One generated game: how it was made and where it lies."""

    split: Split
    index: int
    seed: int
    challenge: str
    settings: dict[str, Any]
    path: str

    @property
    def recipe(self) -> str:
        """A short name of the generator and its difficulty (``custom r4 o8 q3``, ``tw-coin_collector L5``)."""
        if self.challenge == "custom":
            s = self.settings
            return f"custom r{s['nb_rooms']} o{s['nb_objects']} q{s['quest_length']}"
        if self.challenge == "tw-simple":
            return f"tw-simple {self.settings['rewards']}/{self.settings['goal']}"
        return f"{self.challenge} L{self.settings['level']}"


@dataclass
class GameSuite:
    """The games of a built suite, by split (``suite.json`` in the suite folder)."""

    root: str
    seed: int
    train: list[GameEntry] = field(default_factory=list)
    heldout: list[GameEntry] = field(default_factory=list)

    @property
    def games(self) -> list[GameEntry]:
        """Every game, training games first."""
        return [*self.train, *self.heldout]

    def paths(self, split: Split) -> list[str]:
        """Game files of one split."""
        return [g.path for g in (self.train if split == "train" else self.heldout)]

    def split_of(self, game_file: str) -> Split | None:
        """The split a game file belongs to (``None`` if it is not in the suite)."""
        name = Path(game_file).name
        for g in self.games:
            if Path(g.path).name == name:
                return g.split
        return None


def recipe_for(seed: int) -> Recipe:
    """The generator and settings of the game with this seed (a pure function of the seed)."""
    rng = random.Random(seed)
    kind = rng.choices(["custom", "tw-treasure_hunter", "tw-coin_collector", "tw-simple"], [4, 3, 2, 1])[0]
    if kind == "custom":
        rooms = rng.randint(1, 6)
        return kind, {
            "nb_rooms": rooms,
            "nb_objects": rng.randint(2, 10),
            "quest_length": rng.randint(1, 4 if rooms > 1 else 3),
        }
    if kind == "tw-treasure_hunter":
        return kind, {"level": rng.randint(1, 20)}
    if kind == "tw-coin_collector":
        return kind, {"level": rng.randint(1, 15)}
    return kind, {
        "rewards": rng.choice(["dense", "balanced", "sparse"]),
        "goal": rng.choice(["detailed", "brief"]),
        "test": False,
    }


def build_suite(
    out_dir: str | os.PathLike[str],
    *,
    train_games: int = 256,
    heldout_games: int = 40,
    seed: int = 0,
    workers: int = 2,
    recipe: Recipe | None = None,
) -> GameSuite:
    """Generate the suite's games into ``out_dir`` (reusing files already there) and write ``suite.json``.

    Args:
        out_dir: Folder for the games and the manifest.
        train_games: Games whose transitions may be used as offline data.
        heldout_games: Games kept out of every training set.
        seed: First seed of each split's range.
        workers: Processes generating games (TextWorld takes 1-3 s a game).
        recipe: One generator and settings for every game (``("tw-coin_collector", {"level": 3})``), a
            family to measure on; by default each seed draws its own (:func:`recipe_for`).
    """
    if train_games < 1 or heldout_games < 0:
        raise ConfigError(f"need train_games >= 1 and heldout_games >= 0, got {train_games}, {heldout_games}")
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    jobs: list[Job] = [("train", i, seed + i, recipe) for i in range(train_games)]
    jobs += [("heldout", i, seed + HELDOUT_SEED_OFFSET + i, recipe) for i in range(heldout_games)]
    with ProcessPoolExecutor(max(1, workers)) as pool:
        entries = list(pool.map(_make_one, [str(root)] * len(jobs), jobs, chunksize=4))
    suite = GameSuite(
        root=str(root),
        seed=seed,
        train=[e for e in entries if e.split == "train"],
        heldout=[e for e in entries if e.split == "heldout"],
    )
    payload = {
        "seed": seed,
        "games": [{**asdict(e), "path": str(Path(e.path).relative_to(root))} for e in suite.games],
    }
    (root / _SUITE_FILE).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return suite


def load_suite(out_dir: str | os.PathLike[str]) -> GameSuite:
    """Read a suite written by :func:`build_suite` (game paths resolved against ``out_dir``)."""
    root = Path(out_dir)
    path = root / _SUITE_FILE
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        games = [GameEntry(**{**g, "path": str(root / g["path"])}) for g in payload["games"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataFormatError(
            f"cannot read the game suite ({e}); build it with build_suite() or scripts/collect_textworld.py --suite DIR",
            path=str(path),
        ) from e
    return GameSuite(
        root=str(root),
        seed=int(payload["seed"]),
        train=[g for g in games if g.split == "train"],
        heldout=[g for g in games if g.split == "heldout"],
    )


_ATTEMPTS = 10
_RETRY_SEED_STRIDE = 10_000_000


def _make_one(root: str, job: Job) -> GameEntry:
    """Generate one game; a seed whose map cannot hold the quest is retried with a derived seed."""
    split, index, game_seed, recipe = job
    challenge, settings = recipe if recipe is not None else recipe_for(game_seed)
    folder = Path(root) / split
    error: Exception | None = None
    for attempt in range(_ATTEMPTS):
        seed = game_seed + attempt * _RETRY_SEED_STRIDE
        target = folder / f"{challenge}-{seed}.z8"
        if target.is_file() and target.stat().st_size > 0:
            return GameEntry(split, index, seed, challenge, settings, str(target))
        try:
            (path,) = make_games(folder, 1, seed=seed, challenge=challenge, settings=settings)
        except Exception as e:  # TextWorld's QuestGenerationError and kin: this map cannot hold the quest
            error = e
            continue
        return GameEntry(split, index, seed, challenge, settings, path)
    raise DataFormatError(f"could not generate {challenge} {settings} from seed {game_seed}: {error}")


def entries_by_path(games: Sequence[GameEntry]) -> dict[str, GameEntry]:
    """The entries keyed by game file name."""
    return {Path(g.path).name: g for g in games}
