"""Exceptions raised by dreamgym_env.

Every failure is blamed on one boundary, so a caller can tell "my server is down" from "the model
answered garbage" from "my config is wrong" without parsing messages. All of them derive from
:class:`DreamGymError`.
"""

from __future__ import annotations


class DreamGymError(Exception):
    """Root of every error this package raises on purpose."""


class ConfigError(DreamGymError, ValueError):
    """A configuration value is missing or invalid."""


class DependencyNotInstalled(DreamGymError, ImportError):
    """An optional dependency is needed for the requested feature.

    The message names the extra to install, e.g. ``pip install "dreamgym-env[buffer]"``, or, for a
    package no extra can install (``install``), what does.
    """

    def __init__(self, package: str, extra: str, feature: str, install: str | None = None) -> None:
        how = install if install is not None else f'Install it with: pip install "dreamgym-env[{extra}]"'
        super().__init__(f"{feature} needs the '{package}' package, which is not installed. {how}")
        self.package = package
        self.extra = extra


class RenderModeError(ConfigError, TypeError):
    """The requested ``render_mode`` is not one the env supports (text envs render ``ansi``/``human``).

    A ``TypeError`` as well, the way Gymnasium and stable-baselines3 expect a constructor to reject an
    argument it cannot take: SB3's ``make_vec_env`` asks for ``render_mode="rgb_array"`` first and, on
    a ``TypeError``, builds the env again without it.
    """

    def __init__(self, message: str) -> None:
        # gymnasium.make re-raises a creator's TypeError as ``type(e)(f"{e} ... with kwargs ({kwargs})")``,
        # which would print every keyword argument, an API key included: keep the message, not them.
        head, cut, _ = message.partition(" with kwargs (")
        super().__init__(head + (" (keyword arguments not shown)" if cut else ""))


class DomainError(DreamGymError, ValueError):
    """A domain name, spec or task is unknown or malformed."""


class SnapshotError(DreamGymError, ValueError):
    """An episode snapshot does not fit the env asked to restore it.

    Not a snapshot at all, one of another domain, one whose state is longer than the env's
    ``max_state_chars``, or one the call cannot take (an ended episode forked in a vector env, a
    later step given as a group's first state): restoring it would not continue the episode it froze.
    """


class UnsupportedError(DreamGymError, NotImplementedError):
    """The env cannot do what was asked, by its nature rather than its configuration.

    A real env's world lives outside it (a game process, a browser page), so it cannot be frozen and
    copied: snapshots and forks are the simulated envs' alone.
    """


class InvalidActionError(DreamGymError, TypeError):
    """An action is not a string; the env cannot even report it back to the agent.

    Well-typed but wrong actions (empty, too long, not in the grammar) are *not* raised: they produce
    the documented failure-feedback state with reward 0 and ``info["last_action_error"]``.
    """


class BackendError(DreamGymError, RuntimeError):
    """The experience-model backend failed."""


class ServerUnreachableError(BackendError):
    """No configured endpoint answered within the timeout and retries."""


class InvalidResponseError(BackendError):
    """The server answered with success, but not with a chat completion.

    An HTML page from a proxy, a body that is not JSON, or JSON without ``choices`` (or with an
    empty list). The experience model treats it like an unparsable answer: it asks again up to
    ``parse_retries`` times, then applies ``on_invalid_output``.
    """


class PromptTooLongError(BackendError):
    """The prompt does not fit in the model's context window."""


class ResponseFormatError(BackendError):
    """The model's answer could not be parsed into the output schema, even after retries."""

    def __init__(self, message: str, raw_output: str | None = None) -> None:
        super().__init__(message)
        self.raw_output = raw_output


class ReplayMissError(BackendError):
    """A replaying backend was asked for a request it never recorded."""


class ServerStartError(DreamGymError, RuntimeError):
    """A model server the package launched (e.g. vLLM for the smoke model) did not come up.

    Carries the server log's path and its last lines, which say why (bad flag, out of memory, ...).
    """

    def __init__(self, message: str, log_path: str | None = None, log_tail: str = "") -> None:
        detail = f"\n--- server log {log_path} (last lines) ---\n{log_tail}" if log_tail else ""
        super().__init__(f"{message}{detail}")
        self.log_path = log_path
        self.log_tail = log_tail


class StoreError(DreamGymError, RuntimeError):
    """The durable store (replay buffer, task pool, recordings) could not be read or written."""


class DataFormatError(DreamGymError, ValueError):
    """An input file does not follow the documented format.

    Carries the file and line so the user can find the bad record.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        where = f"{path}:{line}: " if path is not None and line is not None else f"{path}: " if path else ""
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line
