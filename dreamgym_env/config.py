"""Typed configuration for the env and its experience-model backend.

Every field has a default. ``gymnasium.make(id, **kwargs)`` accepts any field of :class:`EnvConfig`
or :class:`BackendConfig` as a flat keyword; endpoints also come from environment variables so a
training script need not carry them:

=========================  ==============================================
``DREAMGYM_BASE_URL``      one URL, or several separated by commas
``DREAMGYM_MODEL``         served model name
``DREAMGYM_API_KEY``       API key (never logged; ``OPENAI_API_KEY`` also read)
=========================  ==============================================
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from dreamgym_env.errors import ConfigError

__all__ = ["BackendConfig", "EnvConfig", "split_overrides"]

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"


def _env_base_urls() -> list[str]:
    raw = os.environ.get("DREAMGYM_BASE_URL", DEFAULT_BASE_URL)
    return [u.strip() for u in raw.split(",") if u.strip()]


def _env_api_key() -> SecretStr:
    return SecretStr(os.environ.get("DREAMGYM_API_KEY") or os.environ.get("OPENAI_API_KEY") or "EMPTY")


class BackendConfig(BaseModel):
    """How to reach the experience model and how to sample from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["openai", "vllm", "scripted"] = Field(
        "openai",
        description="'openai': any OpenAI-compatible server (vLLM, SGLang...); 'vllm': in-process "
        "vllm.LLM engine; 'scripted': the deterministic fake model for tests.",
    )
    base_url: list[str] = Field(default_factory=_env_base_urls, description="One or several endpoints.")
    model: str = Field(default_factory=lambda: os.environ.get("DREAMGYM_MODEL", ""))
    api_key: SecretStr = Field(default_factory=_env_api_key)
    timeout: float = Field(60.0, gt=0, description="Seconds one HTTP attempt may take.")
    connect_timeout: float = Field(5.0, gt=0, description="Seconds to establish a connection.")
    max_retries: int = Field(2, ge=0, description="Retries (with backoff) of a failed HTTP attempt.")
    max_concurrency: int = Field(256, ge=1, description="Requests in flight at once, per process.")
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(1024, ge=1, description="Generation budget for one transition.")
    send_seed: bool = Field(
        False,
        description="Send each request's seed (drawn from the env's RNG) as vLLM's per-request `seed`, making "
        "sampling repeatable on GPU servers. Off by default: vLLM's CPU build (0.32) crashes its engine on a "
        "seeded request whose prompt is prefilled in chunks.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra request fields for the server."
    )

    @field_validator("base_url", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [u.strip() for u in value.split(",") if u.strip()]
        if isinstance(value, (list, tuple)):
            return [str(u).rstrip("/") for u in value]
        return value

    @field_validator("api_key", mode="before")
    @classmethod
    def _default_key(cls, value: Any) -> Any:
        return _env_api_key() if value is None else value


class EnvConfig(BaseModel):
    """How one simulated episode runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int | None = Field(None, ge=1, description="Step limit; None takes the domain's default.")
    top_k: int = Field(4, ge=0, description="Demonstrations retrieved from the replay buffer per step.")
    history_window: int | None = Field(
        None,
        ge=0,
        description="Most recent steps of history in the prompt; None keeps all (best for caching).",
    )
    max_action_chars: int = Field(512, ge=1)
    max_state_chars: int = Field(4000, ge=16, description="Cap on a predicted state (enforced in decoding).")
    max_reasoning_chars: int = Field(1200, ge=0)
    max_admissible_actions: int = Field(64, ge=0)
    caps_in_schema: bool = Field(
        False,
        description=(
            "Also write the character caps into the output schema (maxLength). Off by default: under "
            "vLLM's xgrammar backend a capped string admits no escape sequence, so a model could never "
            "write a newline in a state; the caps are checked after parsing instead (a longer answer "
            "counts as unparsable)."
        ),
    )
    parse_retries: int = Field(2, ge=0, description="New requests after an unparsable answer.")
    on_invalid_output: Literal["raise", "fail_state"] = Field(
        "raise",
        description="After parse retries: raise ResponseFormatError, or return the unchanged state with "
        "reward 0 and info['model_error'] (the episode continues).",
    )
    store_transitions: Literal["all", "none"] = Field(
        "all", description="Whether simulated transitions are offered to the retriever's store."
    )
    backend: BackendConfig = Field(default_factory=BackendConfig)


def split_overrides(config: EnvConfig | None, overrides: dict[str, Any]) -> EnvConfig:
    """Merge flat keyword overrides (``base_url=``, ``top_k=``...) into an :class:`EnvConfig`.

    Raises:
        ConfigError: an unknown keyword or an invalid value; the message lists what is accepted.
    """
    base = config or EnvConfig()
    env_fields = set(EnvConfig.model_fields) - {"backend"}
    backend_fields = set(BackendConfig.model_fields)
    env_kw: dict[str, Any] = {}
    backend_kw: dict[str, Any] = {}
    for key, value in overrides.items():
        if key in env_fields:
            env_kw[key] = value
        elif key in backend_fields:
            backend_kw[key] = value
        else:
            accepted = sorted(env_fields | backend_fields)
            raise ConfigError(f"Unknown option {key!r}. Accepted options: {accepted}")
    try:
        backend = BackendConfig.model_validate({**_explicit(base.backend), **backend_kw})
        return EnvConfig.model_validate({**_explicit(base), **env_kw, "backend": backend})
    except ValidationError as e:
        raise ConfigError(f"Invalid configuration: {e}") from e


def _explicit(model: BaseModel) -> dict[str, Any]:
    """Fields as attributes (not dumped), so nested models and secrets survive re-validation."""
    return {name: getattr(model, name) for name in type(model).model_fields}
