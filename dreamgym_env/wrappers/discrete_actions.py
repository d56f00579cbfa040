"""Admissible text actions as ``Discrete(K)``, with action masks, for classic RL libraries.

stable-baselines3 and its relatives need a fixed, finite action space; a DreamGym env takes free text.
Every domain with enumerable actions (WebShop, ALFWorld, TextWorld, most user specs) lists the valid
commands of the current state in ``info["admissible_actions"]``, so index ``i`` can stand for the
``i``-th of them. The list changes with the state, which is what the action mask (sb3-contrib's
``MaskablePPO`` reads ``env.action_masks()``) tells the learner.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, SupportsInt

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from dreamgym_env.errors import ConfigError, DreamGymError

InvalidIndexPolicy = Literal["fail", "wrap"]
"""What an index with no admissible action behind it does: ``"fail"`` plays the env's own
invalid-action path (the state is unchanged, reward 0, the step counts toward truncation);
``"wrap"`` plays admissible action ``index % n``."""


class DiscreteActions(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Expose the current state's admissible actions as ``Discrete(max_actions)``.

    Action ``i`` plays the ``i``-th entry of ``info["admissible_actions"]`` of the current state, in the
    env's own order (TextWorld sorts them; simulated envs keep the experience model's order). When a
    state lists more than ``max_actions``, only the first ``max_actions`` are reachable and
    ``info["actions_dropped"]`` counts the others.

    :meth:`action_masks` (and ``info["action_mask"]``) marks the indices that have an action behind
    them; sb3-contrib's ``MaskablePPO`` finds the method through the wrapper chain, so a masked learner
    only ever picks real actions. An unmasked learner (plain ``PPO``, random sampling, SB3's
    ``check_env``) can pick an index past the end of the list; ``on_invalid`` decides what happens:

    * ``"fail"`` (default): the env's own failure path. The empty action is sent, which every DreamGym
      env (simulated or real) answers with the ``[Invalid action]`` feedback state, reward 0, unchanged
      world, and a counted step (so truncation still ends a stuck episode). ``info["last_action_error"]``
      names the index.
    * ``"wrap"``: index ``i`` plays action ``i % n``; every index is then a real action, which suits
      learners without masks at the price of aliasing the indices.

    A state with no admissible action at all (a simulated model that listed none) leaves a mask with
    only index 0 set, played through the ``"fail"`` path: the episode waits for truncation instead of
    crashing the learner on an all-false mask. Domains whose actions cannot be enumerated
    (``Domain.open_actions``, e.g. WebArena) are rejected at construction: use the text action space
    with an LLM policy (:mod:`dreamgym_env.training.collector`) there.

    ``info["action_text"]`` is the string actually played.

    ``skip_verbs`` leaves commands out of the index space by their first word, the same way in a real
    and a simulated env: in TextWorld's canonical state ``look``, ``inventory`` and ``examine`` show
    nothing the state does not already hold, so a policy over the rest spends its steps on the world.
    ``info["admissible_actions"]`` still lists everything the env admits.

    Args:
        env: A DreamGym env (simulated or real) whose ``info`` carries ``admissible_actions``.
        max_actions: ``K``, the size of the discrete space: at least the longest admissible list the
            policy should see (TextWorld's simple games list 3-10 commands; 16-32 is a safe range).
        on_invalid: ``"fail"`` or ``"wrap"`` (see above).
        skip_verbs: first words of commands the policy is not offered (e.g. ``("look", "inventory",
            "examine")``); none by default.

    Example:
        >>> env = DiscreteActions(gymnasium.make("DreamGym/TextWorld-Real-v0", game_files=games), 16)
        >>> obs, info = env.reset(seed=0)
        >>> info["action_mask"]          # array([ True,  True,  True, False, ...])
        >>> obs, reward, terminated, truncated, info = env.step(1)   # plays the second admissible command
    """

    def __init__(
        self,
        env: gym.Env[Any, str],
        max_actions: int = 32,
        on_invalid: InvalidIndexPolicy = "fail",
        *,
        skip_verbs: Sequence[str] = (),
    ) -> None:
        if isinstance(env, VectorEnv):
            raise ConfigError(
                "DiscreteActions wraps one env; for a vector env (gymnasium.make_vec) use "
                "dreamgym_env.wrappers.VectorDiscreteActions(envs, max_actions, on_invalid), which keeps "
                "the native vector env's concurrent steps."
            )
        check_discrete_config(max_actions, on_invalid, getattr(env.unwrapped, "domain", None))
        gym.utils.RecordConstructorArgs.__init__(
            self, max_actions=max_actions, on_invalid=on_invalid, skip_verbs=tuple(skip_verbs)
        )
        super().__init__(env)
        self.max_actions = max_actions
        self.on_invalid: InvalidIndexPolicy = on_invalid
        self.skip_verbs = check_skip_verbs(skip_verbs)
        self.action_space = spaces.Discrete(max_actions)
        self._actions: list[str] = []

    @property
    def actions(self) -> list[str]:
        """The admissible actions of the current state that indices ``0..K-1`` stand for."""
        return list(self._actions)

    def action_masks(self) -> np.ndarray:
        """Boolean mask of shape ``(K,)``: True where an index plays an admissible action.

        Never all False: a state without admissible actions leaves index 0 (the failure path) open.
        """
        return action_mask(len(self._actions), self.max_actions)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and read the first state's admissible actions."""
        obs, info = self.env.reset(seed=seed, options=options)
        if "admissible_actions" not in info:
            raise DreamGymError(
                "DiscreteActions wraps DreamGym envs, whose info carries 'admissible_actions'; this env's "
                f"reset info has only {sorted(info)}."
            )
        return obs, self._observe(info)

    def step(self, action: SupportsInt) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Play the admissible action at index ``action`` (see the class docstring for other indices)."""
        index = int(action)
        text, error = index_to_action(self._actions, index, self.on_invalid)
        obs, reward, terminated, truncated, info = self.env.step(text)
        if error is not None:
            info["last_action_error"] = error
        info["action_text"] = text
        return obs, float(reward), terminated, truncated, self._observe(info)

    def _observe(self, info: dict[str, Any]) -> dict[str, Any]:
        self._actions = _observe_actions(info, self.max_actions, self.skip_verbs)
        return info


def check_discrete_config(max_actions: int, on_invalid: str, domain: Any = None) -> None:
    """Validate ``max_actions`` and ``on_invalid``, and refuse a domain with an open action space.

    Raises:
        ConfigError: With what was expected and how to fix it.
    """
    if not isinstance(max_actions, int) or max_actions < 1:
        raise ConfigError(f"max_actions must be a positive int, got {max_actions!r}; 16-32 suits text games.")
    if on_invalid not in ("fail", "wrap"):
        raise ConfigError(f"on_invalid must be 'fail' or 'wrap', got {on_invalid!r}.")
    if domain is not None and getattr(domain, "open_actions", False):
        raise ConfigError(
            f"DiscreteActions needs admissible action lists, but domain {domain.name!r} has an open "
            "action space (admissible_actions is empty). Keep its text actions and use an LLM policy "
            "(dreamgym_env.training.collect_groups) or a policy of your own over the action grammar."
        )


def check_skip_verbs(skip_verbs: Sequence[str]) -> frozenset[str]:
    """``skip_verbs`` as a set of lower-case words.

    Raises:
        ConfigError: a string instead of a sequence of them, or an entry that is not one word.
    """
    if isinstance(skip_verbs, str) or not all(isinstance(v, str) and v.split() == [v] for v in skip_verbs):
        raise ConfigError(
            f"skip_verbs must be a sequence of single words (first words of commands, e.g. "
            f"('look', 'inventory', 'examine')), got {skip_verbs!r}."
        )
    return frozenset(v.lower() for v in skip_verbs)


def offered_actions(listed: Iterable[Any], skip_verbs: frozenset[str]) -> list[str]:
    """The admissible actions a policy is offered: ``listed`` as text, without those ``skip_verbs`` names."""
    actions = [str(a) for a in listed]
    if not skip_verbs:
        return actions
    return [
        a for a in actions if a.split(maxsplit=1)[:1] and a.split(maxsplit=1)[0].lower() not in skip_verbs
    ]


def action_mask(n_actions: int, max_actions: int) -> np.ndarray:
    """The ``(max_actions,)`` boolean mask of a state listing ``n_actions`` admissible actions.

    Never all False: a state without admissible actions leaves index 0 (the failure path) open.
    """
    mask = np.zeros(max_actions, dtype=bool)
    mask[: max(n_actions, 1)] = True
    return mask


def index_to_action(actions: list[str], index: int, on_invalid: InvalidIndexPolicy) -> tuple[str, str | None]:
    """The text that index ``index`` plays among ``actions``, and the error to report (or None).

    An index without an action behind it plays ``""`` (the env's failure path) under ``"fail"``, and
    ``actions[index % n]`` under ``"wrap"`` (when there is any action and the index is not negative).
    """
    n = len(actions)
    if 0 <= index < n:
        return actions[index], None
    if on_invalid == "wrap" and n and index >= 0:
        return actions[index % n], None
    return "", (
        f"Action index {index} has no admissible action behind it: this state lists {n} "
        f"(valid indices 0..{n - 1}); see info['action_mask']."
        if n
        else f"Action index {index}: this state lists no admissible action."
    )


def _observe_actions(info: dict[str, Any], max_actions: int, skip_verbs: frozenset[str]) -> list[str]:
    """Read the first ``max_actions`` offered actions of a state from ``info``, annotating it.

    Sets ``info["actions_dropped"]`` (how many offered actions are out of reach) and
    ``info["action_mask"]``; returns the reachable actions, which indices ``0..K-1`` stand for.
    """
    listed = offered_actions(info.get("admissible_actions") or [], skip_verbs)
    actions = listed[:max_actions]
    info["actions_dropped"] = len(listed) - len(actions)
    info["action_mask"] = action_mask(len(actions), max_actions)
    return actions
