"""Exceptions raised by dreamgym_env.

Every failure is blamed on one boundary, so a caller can tell "my server is down" from "the model
answered garbage" from "my config is wrong" without parsing messages. All of them derive from
:class:`DreamGymError`.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "ConfigError",
    "DataFormatError",
    "DependencyNotInstalled",
    "DomainError",
    "DreamGymError",
    "InvalidActionError",
    "PromptTooLongError",
    "ReplayMissError",
    "ResponseFormatError",
    "ServerUnreachableError",
    "StoreError",
]


class DreamGymError(Exception):
    """Root of every error this package raises on purpose."""


class ConfigError(DreamGymError, ValueError):
    """A configuration value is missing or invalid."""


class DependencyNotInstalled(DreamGymError, ImportError):
    """An optional dependency is needed for the requested feature.

    The message names the extra to install, e.g. ``pip install "dreamgym-env[buffer]"``.
    """

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the '{package}' package, which is not installed. "
            f'Install it with: pip install "dreamgym-env[{extra}]"'
        )
        self.package = package
        self.extra = extra


class DomainError(DreamGymError, ValueError):
    """A domain name, spec or task is unknown or malformed."""


class InvalidActionError(DreamGymError, TypeError):
    """An action is not a string; the env cannot even report it back to the agent.

    Well-typed but wrong actions (empty, too long, not in the grammar) are *not* raised: they produce
    the documented failure-feedback state with reward 0 and ``info["last_action_error"]``.
    """


class BackendError(DreamGymError, RuntimeError):
    """The experience-model backend failed."""


class ServerUnreachableError(BackendError):
    """No configured endpoint answered within the timeout and retries."""


class PromptTooLongError(BackendError):
    """The prompt does not fit in the model's context window."""


class ResponseFormatError(BackendError):
    """The model's answer could not be parsed into the output schema, even after retries."""

    def __init__(self, message: str, raw_output: str | None = None) -> None:
        super().__init__(message)
        self.raw_output = raw_output


class ReplayMissError(BackendError):
    """A replaying backend was asked for a request it never recorded."""


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
