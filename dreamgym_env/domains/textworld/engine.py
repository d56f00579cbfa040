"""TextWorld (real): games generated locally by TextWorld, behind ``DreamGym/TextWorld-v0``'s interface.

TextWorld needs no download: :func:`make_games` generates games (what ``tw-make`` does) and
:class:`TextWorldRealEnv` plays them: an :class:`~dreamgym_env.episode.EpisodeEnv` whose world is a
:class:`TextWorldEngine`. :class:`TextGameEngine` is the part shared with ALFWorld, whose games run on
the same engine.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.domains.textworld.domain import (
    TextWorldDomain,
    render_textworld_start,
    render_textworld_state,
    textworld_task_id,
)
from dreamgym_env.domains.textworld.facts import (
    Fact,
    facts_of,
    render_facts_state,
    render_goal,
    render_world,
    step_result,
)
from dreamgym_env.domains.textworld.families import game_family, game_rooms
from dreamgym_env.domains.textworld.game_file import check_game_file, check_game_files
from dreamgym_env.episode import EpisodeEnv, WorldAttribute
from dreamgym_env.errors import ConfigError, DependencyNotInstalled, DreamGymError
from dreamgym_env.real.mapping import clean_game_text
from dreamgym_env.records import Task, Transition
from dreamgym_env.world import EngineWorld, EpisodeStart, WorldStep

__all__ = [
    "TextGameEngine",
    "TextGameEnv",
    "TextWorldEngine",
    "TextWorldRealEnv",
    "make_games",
    "play_noisy_expert",
    "tasks_from_games",
]

PathLike = str | os.PathLike[str]

# The status line of compiled games ("> ... -= Kitchen =-7/9") and the end-of-game prompt.
_STATUS = re.compile(r"^>.*?(?:-= .+ =-\s*\d+/\d+)?\s*$", re.MULTILINE)
_RESTART = re.compile(r"^Would you like to RESTART.*$", re.MULTILINE)


def _import_textworld() -> Any:
    """Import textworld, or say which extra installs it."""
    try:
        import textworld
    except ImportError as e:
        raise DependencyNotInstalled("textworld", "real", "The real TextWorld and ALFWorld envs") from e
    return textworld


def clean_feedback(text: str) -> str:
    """A TextWorld step's feedback without the status line and the restart prompt."""
    return clean_game_text(_RESTART.sub("", _STATUS.sub("", text)))


class TextGameEngine(EngineWorld):
    """TextWorld's engine on a set of game files: the world of a real text-game env.

    Reset draws a game from ``game_files`` with the env's RNG (or plays ``options["game_file"]`` /
    ``options["game_index"]``); the game process is started on first use and again when the game
    changes. The reward is DreamGym's binary outcome (1.0 on the winning step, else 0.0); the game's
    own score is in ``info["score"]``, and the engine's walkthrough for the current state in
    ``info["expert_plan"]``. States are the game's text; :class:`TextWorldEngine` and
    :class:`~dreamgym_env.real.alfworld.ALFWorldEngine` say how their games are read.

    Args:
        game_files: Game files to play.
        domain: The simulated domain mirrored (name or :class:`Domain`).
    """

    def __init__(self, game_files: Sequence[PathLike], *, domain: str | Domain) -> None:
        self.domain = get_domain(domain)
        self.game_files = [str(Path(f)) for f in game_files]
        if not self.game_files:
            raise DreamGymError(
                f"No game files given for {self.domain.env_id}'s real counterpart; pass game_files=[...]."
            )
        missing = [f for f in self.game_files if not os.path.isfile(f)]
        if missing:
            raise DreamGymError(f"Game files not found: {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        check_game_files(self.game_files)  # the engine ends the process on a damaged one
        self._engine: Any = None
        self._game = ""

    # -------------------------------------------------------------- how a game is read
    def _request_infos(self, textworld: Any) -> Any:
        return textworld.EnvInfos(
            won=True,
            lost=True,
            admissible_commands=True,
            policy_commands=True,
            description=True,
            objective=True,
            score=True,
            max_score=True,
        )

    def _wrappers(self) -> list[Callable[..., Any]]:
        return []

    def _first_state(self, game_state: Mapping[str, Any]) -> str:
        return render_textworld_start(str(game_state["description"]), str(game_state["objective"] or ""))

    def _make_task(self, game: str, game_state: Mapping[str, Any], state: str) -> Task:
        objective = " ".join(str(game_state["objective"] or "").split())
        made = {"family": game_family(game), "rooms": game_rooms(game)}  # how the game was made: public
        return Task(
            task_id=textworld_task_id(game),
            domain=self.domain.name,
            instruction=objective,
            metadata={"game_file": game, **{k: v for k, v in made.items() if v is not None}},
            source=f"{self.domain.name}:real",
        )

    def _expert_plan(self, game_state: Mapping[str, Any]) -> list[str]:
        return list(game_state.get("policy_commands") or [])

    def _step_state(self, game_state: Mapping[str, Any]) -> str:
        return clean_feedback(str(game_state.get("feedback")))

    def _step_extra(self, game_state: Mapping[str, Any], score: float, won: bool) -> dict[str, Any]:
        return {
            "expert_plan": self._expert_plan(game_state),
            "score": score,
            "won": won,
            "lost": bool(game_state.get("lost") or False),
        }

    # -------------------------------------------------------------- World
    def reset(self, options: dict[str, Any], rng: np.random.Generator) -> EpisodeStart:
        """Start the chosen game (``options["game_file"]``/``["game_index"]``, else drawn from ``rng``)."""
        textworld = _import_textworld()
        if options.get("game_file"):
            game = str(options["game_file"])
        elif options.get("game_index") is not None:
            game = self.game_files[int(options["game_index"])]
        else:
            game = self.game_files[int(rng.integers(len(self.game_files)))]
        if self._engine is None or game != self._game:
            check_game_file(game)
            self.close()
            self._engine = textworld.start(game, self._request_infos(textworld), wrappers=self._wrappers())
            self._game = game
        game_state = self._engine.reset()
        state = self._first_state(game_state)
        return EpisodeStart(
            task=self._make_task(game, game_state, state),
            state=state,
            admissible_actions=list(game_state["admissible_commands"] or []),
            extra={"expert_plan": self._expert_plan(game_state), "score": 0.0, "game_file": game},
        )

    def advance(self, action: str) -> WorldStep:
        """One command sent to the game."""
        game_state, score, done = self._engine.step(action)
        won = bool(game_state["won"])
        return WorldStep(
            state=self._step_state(game_state),
            reward=1.0 if won else 0.0,
            done=bool(done),
            success=won,
            admissible_actions=list(game_state["admissible_commands"] or []),
            extra=self._step_extra(game_state, float(score or 0.0), won),
        )

    def close(self) -> None:
        """Stop the game process."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_engine"] = None  # the game process is reopened on the next reset
        return state


class TextGameEnv(EpisodeEnv):
    """A real episode of one game file played with TextWorld's engine: ``EpisodeEnv(domain, TextGameEngine(...))``.

    Args:
        game_files: Game files to play.
        domain: Name of the simulated domain mirrored.
        **kwargs: :class:`~dreamgym_env.episode.EpisodeEnv` arguments (``max_steps``, ``render_mode``...).
    """

    world: TextGameEngine

    def __init__(self, game_files: Sequence[PathLike], *, domain: str | Domain, **kwargs: Any) -> None:
        engine = TextGameEngine(game_files, domain=domain)
        super().__init__(engine.domain, engine, **kwargs)

    game_files = WorldAttribute[list[str]]("The games reset draws from.")


StateFormat = Literal["facts", "text"]
STATE_FORMATS: tuple[str, ...] = ("facts", "text")


class TextWorldEngine(TextGameEngine):
    """TextWorld games as the world of ``DreamGym/TextWorld-Real-v0``, read in the simulated env's format.

    ``state_format="facts"`` (default) renders each state from the engine's world facts
    (:mod:`dreamgym_env.domains.textworld.facts`), and the task carries the game's layout and goal for
    a privileged experience model; ``"text"`` gives the game's prose (see :class:`TextWorldRealEnv`).

    Raises:
        ConfigError: No games, or an unknown ``state_format``.
    """

    def __init__(
        self, game_files: Sequence[PathLike] | None = None, *, state_format: StateFormat = "facts"
    ) -> None:
        if game_files is None:
            raise ConfigError(
                "DreamGym/TextWorld-Real-v0 plays TextWorld game files, and none were given: pass "
                "game_files=[...] (paths to .z8 or .ulx games), e.g. gymnasium.make("
                "'DreamGym/TextWorld-Real-v0', game_files=make_games('games/', n=10)). "
                "dreamgym_env.real.textworld.make_games generates games offline (what `tw-make` does; "
                'needs pip install "dreamgym-env[real]"), and dreamgym_env.real.textworld_suite.build_suite '
                "a varied train/held-out suite. See docs/real_envs.md."
            )
        if state_format not in STATE_FORMATS:
            raise ConfigError(f"state_format must be one of {list(STATE_FORMATS)}, got {state_format!r}.")
        self.state_format: StateFormat = state_format
        self._facts: list[Fact] = []
        super().__init__(game_files, domain=TextWorldDomain())

    def _request_infos(self, textworld: Any) -> Any:
        infos = super()._request_infos(textworld)
        infos.inventory = True
        infos.facts = self.state_format == "facts"
        return infos

    def _first_state(self, game_state: Mapping[str, Any]) -> str:
        if self.state_format == "facts":
            self._facts = facts_of(game_state["facts"])
            return render_facts_state(self._facts, quest=str(game_state["objective"] or ""))
        return render_textworld_start(
            str(game_state["description"]),
            str(game_state["objective"] or ""),
            clean_game_text(str(game_state.get("inventory") or "")),
        )

    def _make_task(self, game: str, game_state: Mapping[str, Any], state: str) -> Task:
        task = super()._make_task(game, game_state, state)
        if self.state_format != "facts":
            return task
        hidden = {"world": render_world(self._facts), "goal": _game_goal(game)}
        return task.model_copy(
            update={"metadata": {**task.metadata, **{k: v for k, v in hidden.items() if v}}}
        )

    def _step_state(self, game_state: Mapping[str, Any]) -> str:
        if self.state_format == "facts":
            facts = facts_of(game_state["facts"])
            result = step_result(
                self._facts, facts, won=bool(game_state.get("won")), lost=bool(game_state.get("lost"))
            )
            self._facts = facts
            return render_facts_state(facts, result)
        return render_textworld_state(
            clean_feedback(str(game_state.get("feedback"))),
            clean_game_text(str(game_state.get("description") or "")),
            clean_game_text(str(game_state.get("inventory") or "")),
        )


class TextWorldRealEnv(EpisodeEnv):
    """Real TextWorld games, observed in the abstract format of ``DreamGym/TextWorld-v0``.

    ## Description
    Plays TextWorld game files (``.z8``/``.ulx`` from ``tw-make`` or :func:`make_games`). By default
    (``state_format="facts"``) an observation is the canonical state rendered from the engine's own
    world facts (:mod:`dreamgym_env.domains.textworld.facts`): the step's result, the room, its exits
    with door states, the things there with what they hold, the inventory; the first one ends with
    ``Your task is to: <quest>``. ``state_format="text"`` gives the game's prose instead (feedback
    without the ASCII banner and status line, then the room as ``look`` prints it and the inventory), for
    a model trained on it; the shipped experience model predicts the facts format.

    It is ``EpisodeEnv(TextWorldDomain(), TextWorldEngine(game_files, state_format=...))``: the
    simulated env with the game engine as its world.

    ## Action Space / Observation Space
    ``FreeText``: TextWorld commands (``go east``, ``take key from chest``...), as in the simulated env.

    ## Rewards
    1.0 on the step that wins the game, else 0.0 (``info["score"]`` keeps the game's own score).

    ## Episode End
    Terminated when the game is won or lost; truncated after 50 steps.

    ## Information
    The simulated env's keys (``simulated`` False, ``source`` "real"), plus ``expert_plan`` (the
    walkthrough from the current state), ``score``, ``won``, ``lost`` and ``game_file``. The task's
    metadata carries, for the experience model only, the game's starting layout (``world``) and the
    quest's winning conditions (``goal``), read from the game's ``.json`` file when it is beside the game.

    ## Arguments
    ``game_files``: the games (required; :func:`make_games` builds some); reset draws one with the
    env's RNG, or plays ``options["game_file"]`` or ``options["game_index"]``. ``state_format``:
    ``"facts"`` (default) or ``"text"``. Other keywords are :class:`~dreamgym_env.episode.EpisodeEnv`'s.
    """

    world: TextWorldEngine

    def __init__(
        self,
        game_files: Sequence[PathLike] | None = None,
        *,
        state_format: StateFormat = "facts",
        **kwargs: Any,
    ) -> None:
        engine = TextWorldEngine(game_files, state_format=state_format)
        super().__init__(engine.domain, engine, **kwargs)

    game_files = WorldAttribute[list[str]]("The games reset draws from.")
    state_format = WorldAttribute[StateFormat]("""``"facts"`` or ``"text"``.""")


@functools.lru_cache(maxsize=256)
def _game_goal(game: str) -> str:
    """The quest's winning conditions of a game, from the ``.json`` file TextWorld writes beside it ("" if none)."""
    meta = Path(game).with_suffix(".json")
    if not meta.is_file():
        return ""
    textworld = _import_textworld()
    loaded = textworld.Game.load(str(meta))
    names = {key: info.name for key, info in loaded.infos.items() if info.name}
    return render_goal(
        [
            [facts_of(event.condition.preconditions, names) for event in quest.win_events]
            for quest in loaded.quests
        ],
        [
            facts_of(event.condition.preconditions, names)
            for quest in loaded.quests
            for event in quest.fail_events
        ],
    )


def make_games(
    output_dir: PathLike,
    n: int = 1,
    *,
    seed: int = 0,
    challenge: str = "tw-simple",
    settings: Mapping[str, Any] | None = None,
) -> list[str]:
    """Generate ``n`` TextWorld games into ``output_dir`` (what ``tw-make <challenge>`` does).

    Args:
        output_dir: Folder for the game files (created if missing).
        n: Number of games; game ``i`` uses seed ``seed + i``.
        seed: First seed.
        challenge: A TextWorld challenge (``tw-simple``, ``tw-cooking``, ``tw-coin_collector``,
            ``tw-treasure_hunter``) or ``custom`` (``tw-make custom``: a random map and quest).
        settings: The challenge's settings (``{"level": 5}``; for ``tw-simple`` sparse rewards and a
            detailed goal by default); for ``custom``: ``nb_rooms``, ``nb_objects``, ``quest_length``.

    Returns:
        Paths of the ``.z8`` game files.
    """
    textworld = _import_textworld()
    challenges = importlib.import_module("textworld.challenges")

    if challenge != "custom" and challenge not in challenges.CHALLENGES:
        raise DreamGymError(
            f"Unknown TextWorld challenge {challenge!r}; available: {sorted(challenges.CHALLENGES) + ['custom']}"
        )
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        options = textworld.GameOptions()
        options.seeds = seed + i
        options.path = str(out / f"{challenge}-{seed + i}.z8")
        options.file_ext = ".z8"
        options.force_recompile = True
        if challenge == "custom":
            custom = {"nb_rooms": 3, "nb_objects": 6, "quest_length": 3, **dict(settings or {})}
            unknown = set(custom) - {"nb_rooms", "nb_objects", "quest_length"}
            if unknown:
                raise DreamGymError(
                    f"Unknown custom game settings {sorted(unknown)}; accepted: nb_rooms, nb_objects, quest_length"
                )
            for key, value in custom.items():
                setattr(options, key, int(value))
            game = textworld.generator.make_game(options)
        else:
            chosen = {"rewards": "sparse", "goal": "detailed", "test": False, **dict(settings or {})}
            game = challenges.CHALLENGES[challenge][1](settings=chosen, options=options)
        paths.append(str(textworld.generator.compile_game(game, options)))
    return paths


def tasks_from_games(game_files: Sequence[PathLike]) -> list[Task]:
    """Tasks for ``DreamGym/TextWorld-v0`` whose first state is the real game's.

    Each game is reset once; the task carries the real first state (``initial_observation``) and its
    commands (``initial_admissible``), so a simulated and a real episode of the same game start alike.
    """
    env = TextWorldRealEnv(game_files)
    try:
        tasks = []
        for game in env.game_files:
            obs, info = env.reset(options={"game_file": game})
            assert env.task is not None
            meta = {
                **env.task.metadata,
                "initial_observation": obs,
                "initial_admissible": info["admissible_actions"],
            }
            tasks.append(env.task.model_copy(update={"metadata": meta}))
        return tasks
    finally:
        env.close()


def play_noisy_expert(
    game: PathLike,
    episodes: int,
    epsilon: float = 0.4,
    max_steps: int = 30,
    seed: int = 0,
    split: str | None = None,
) -> list[Transition]:
    """Real transitions of one game: an expert episode, then ``episodes - 1`` noisy-expert ones.

    The expert follows the engine's walkthrough from the current state; a noisy expert plays a random
    admissible command instead with probability ``epsilon``, so the data holds refusals, detours and
    losses as well as winning lines. Everything is seeded: the same arguments give the same
    transitions. Each transition's metadata holds what ``dreamgym build-sft`` reads (``task_metadata``,
    ``admissible_actions`` after the step, ``prev_admissible_actions`` before it), the policy, the game
    file and, when given, the game's suite ``split``. ``max_steps`` is this collection's episode length
    (30 by default, shorter than the domain's limit), not the domain's step limit.
    """
    game = str(game)
    env = TextWorldRealEnv([game], max_steps=max_steps)
    rng = np.random.default_rng(seed)
    out: list[Transition] = []
    try:
        for episode in range(episodes):
            _, info = env.reset(seed=seed * 1000 + episode, options={"game_file": game})
            eps = 0.0 if episode == 0 else epsilon
            policy = "expert" if eps == 0 else f"expert+random({eps})"
            for _ in range(max_steps):
                admissible = list(info["admissible_actions"])
                plan = list(info.get("expert_plan") or [])
                if plan and rng.random() >= eps:
                    action = plan[0]
                else:
                    action = str(rng.choice(admissible)) if admissible else "look"
                _, reward, terminated, truncated, info = env.step(action)
                stored = env.last_transition  # None only for an action the env rejected
                if stored is not None:
                    extra = {"policy": policy, "game_file": game, **({"suite_split": split} if split else {})}
                    out.append(stored.model_copy(update={"metadata": {**stored.metadata, **extra}}))
                if terminated or truncated:
                    break
    finally:
        env.close()
    return out
