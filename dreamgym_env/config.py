"""Typed configuration for the env and its experience-model backend.

Every field has a default. ``gymnasium.make(id, **kwargs)`` accepts any field of :class:`EnvConfig`
or :class:`BackendConfig` as a flat keyword; endpoints also come from environment variables so a
training script need not carry them:

=========================  ==============================================
``DREAMGYM_BASE_URL``      one URL, or several separated by commas
``DREAMGYM_MODEL``         served model name
``DREAMGYM_API_KEY``       API key (never logged; ``OPENAI_API_KEY`` also read)
=========================  ==============================================

Keys are secrets wherever they come from: ``api_key`` is a ``SecretStr``, and a key written into a
URL (``https://user:KEY@host/v1``) is taken out of it (``base_url`` holds the URL without it, the
credentials travel as HTTP Basic auth, as before). Neither appears in ``repr``, errors, logs,
recordings or ``env.spec``.
"""

from __future__ import annotations

import base64
import os
import re
from typing import Any, Literal, TypeVar
from urllib.parse import unquote, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from dreamgym_env._secrets import (
    MASK,
    Redacted,
    redact_text,
    redact_url,
    secrets_gymnasium_would_show,
    split_userinfo,
)
from dreamgym_env.errors import ConfigError
from dreamgym_env.shipped_settings import SHIPPED_MODELS, recommended_env_kwargs
from dreamgym_env.spaces import DEFAULT_MAX_STATE_CHARS

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
M = TypeVar("M", bound=BaseModel)
_SCHEME_OF = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _env_base_urls() -> list[str]:
    raw = os.environ.get("DREAMGYM_BASE_URL", DEFAULT_BASE_URL)
    return [u.strip() for u in raw.split(",") if u.strip()]


def _split_urls(value: Any) -> Any:
    """One URL, several separated by commas, or a list of them, as a list without trailing slashes."""
    if isinstance(value, Redacted):  # from an env spec made in this process
        value = value.secret
    if isinstance(value, str):
        value = [u.strip() for u in value.split(",") if u.strip()]
    if isinstance(value, (list, tuple)):
        return [str(u.secret if isinstance(u, Redacted) else u).rstrip("/") for u in value]
    return value


_URL_HELP = (
    "Accepted: http:// or https:// URLs with a host and an optional port 1-65535 (http://host:port/v1), "
    "several separated by commas; percent-encode a comma, '@', '/', '#', ':', '%' or a space inside a "
    "user name or password (%2C, %40, %2F, %23, %3A, %25, %20)"
)
_USERINFO = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*")
"""RFC 3986 userinfo: unreserved characters, sub-delimiters, ':' and percent-encoded bytes."""
_HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9\-_.]*[A-Za-z0-9])?\.?")


def _url_problem(url: str, *, show: bool) -> str | None:
    """What is wrong with one endpoint URL (``None`` when nothing is), in words that hold no secret.

    Checked when the config is made, so a URL no client can use fails there, with this message,
    instead of at the first step with the HTTP client's (which quotes the text it could not read,
    a piece of a password included). ``show`` says whether the URL's host and port may be quoted: not
    when the configured value holds credentials anywhere, since a comma in a password splits it into
    pieces that each look like a URL.
    """
    scheme = _SCHEME_OF.match(url)
    if scheme is None:
        return "has no scheme"
    if scheme.group(1).lower() not in ("http", "https"):
        return f"scheme {scheme.group(1)!r} is not http or https"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL (an unclosed '[' of an IPv6 address?)"
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at and not _USERINFO.fullmatch(userinfo):
        return "its user name or password holds characters a URL cannot carry as they are"
    host = parts.hostname or ""
    if not host:
        return "has no host"
    if not (hostport.startswith("[") or _HOST_NAME.fullmatch(host) or _idna_host(host)):
        return "is not a host name" + (f" ({host!r})" if show else "")
    try:
        port = parts.port
    except ValueError:
        port_text = hostport.rpartition("]")[2].rpartition(":")[2]
        if not port_text.isdigit():
            return "its port is not a number"
        port = int(port_text)
    if port is not None and not 1 <= port <= 65535:
        return f"port {port} is out of range 1-65535" if show else "its port is out of range 1-65535"
    return None


def _idna_host(host: str) -> bool:
    """Whether ``host`` is an internationalised domain name the HTTP client can encode."""
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    return _HOST_NAME.fullmatch(ascii_host) is not None


def _check_urls(urls: list[str]) -> None:
    """Raise on the first URL :func:`_url_problem` refuses, naming it by position and safe parts only."""
    show = not any("@" in u for u in urls)
    for position, url in enumerate(urls, start=1):
        problem = _url_problem(url, show=show)
        if problem is None:
            continue
        scheme = _SCHEME_OF.match(url)
        shown = redact_url(url) if show else f"{scheme.group(0) if scheme else ''}{MASK}"
        message = f"base_url entry {position} of {len(urls)} ({shown}) {problem}. {_URL_HELP}"
        # A lone surrogate (a host name from undecodable bytes) is shown escaped: messages are UTF-8.
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
        raise PydanticCustomError("url_invalid", "{message}", {"message": message})


def _env_api_key() -> SecretStr:
    return SecretStr(os.environ.get("DREAMGYM_API_KEY") or os.environ.get("OPENAI_API_KEY") or "EMPTY")


class BackendConfig(BaseModel):
    """How to reach the experience model and how to sample from it."""

    # Inputs stay out of validation messages: a wrongly typed key would otherwise be printed.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    backend: Literal["openai", "vllm", "scripted"] = Field(
        "openai",
        description="'openai': any OpenAI-compatible server (vLLM, SGLang...); 'vllm': in-process "
        "vllm.LLM engine; 'scripted': the deterministic fake model for tests.",
    )
    base_url: list[str] = Field(default_factory=_env_base_urls, description="One or several endpoints.")
    model: str = Field(default_factory=lambda: os.environ.get("DREAMGYM_MODEL", ""))
    api_key: SecretStr = Field(default_factory=_env_api_key)
    endpoint_auth: tuple[SecretStr | None, ...] = Field(
        (),
        repr=False,
        exclude=True,
        description="Userinfo taken out of each base_url (filled in from the URLs; not set by hand).",
    )
    timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds one HTTP attempt may take from sending to the last byte of the answer (a "
        "deadline for the whole attempt, not a limit per read: a server that trickles bytes is cut off).",
    )
    deadline: float | None = Field(
        None,
        gt=0,
        description="Seconds one request may take in all: attempts, back-off and fail-over to other "
        "endpoints. None: timeout x (max_retries + number of endpoints), room for one attempt at every "
        "endpoint plus the retries.",
    )
    connect_timeout: float = Field(5.0, gt=0, description="Seconds to establish a connection.")
    max_retries: int = Field(
        2,
        ge=0,
        description="Retries of each endpoint after a failed attempt (connection error, timeout, HTTP 408, "
        "409, 429 or 5xx), with back-off; moving on to another endpoint is not a retry.",
    )
    retry_backoff: float = Field(
        0.5, ge=0, description="Seconds to wait before the first retry; doubled for each next one, up to 8 s."
    )
    endpoint_cooldown: float = Field(
        10.0,
        ge=0,
        description="Seconds an endpoint that failed (or the server's Retry-After, if longer) is tried "
        "only after the others; then one request probes it and a success makes it healthy again.",
    )
    max_concurrency: int = Field(256, ge=1, description="Requests in flight at once, per process.")
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(
        1024,
        ge=1,
        le=2**31 - 1,  # servers read it as a 32-bit int: a larger one fails every request, not the config
        description="Generation budget for one transition.",
    )
    send_seed: bool = Field(
        False,
        description="Send each request's seed (drawn from the env's RNG) as vLLM's per-request `seed`, making "
        "sampling repeatable on GPU servers. Off by default: vLLM's CPU build (0.32) crashes its engine on a "
        "seeded request whose prompt is prefilled in chunks.",
    )
    logprobs: bool = Field(
        False,
        description="Ask the server for the log-probability of each answer token and report how sure the "
        "model was of the answer that decided a step, exp(mean token log-probability), as info['confidence'] "
        "(None on steps no request answered, and from a server that sends no log-probabilities).",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra request fields for the server."
    )

    @model_validator(mode="before")
    @classmethod
    def _userinfo_out_of_urls(cls, data: Any) -> Any:
        """Move ``user:key@`` out of each URL into :attr:`endpoint_auth`, so no URL carries a secret."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        urls = _split_urls(data["base_url"]) if "base_url" in data else _env_base_urls()
        if not isinstance(urls, list):
            return data  # not URLs at all: the field's own validation says so
        _check_urls(urls)
        pairs = [split_userinfo(u) for u in urls]
        clean = [url for url, _ in pairs]
        found = [info for _, info in pairs]
        data["base_url"] = clean
        if any(info is not None for info in found):
            data["endpoint_auth"] = tuple(None if info is None else SecretStr(info) for info in found)
        elif len(data.get("endpoint_auth") or ()) != len(clean):
            data["endpoint_auth"] = ()
        return data

    @field_validator("api_key", mode="before")
    @classmethod
    def _default_key(cls, value: Any) -> Any:
        if isinstance(value, Redacted):  # from an env spec made in this process
            return value.secret
        if value is None or value == MASK:  # MASK: a spec read back from JSON, which holds no key
            return _env_api_key()
        return value

    def endpoint_headers(self, index: int) -> dict[str, str]:
        """HTTP headers endpoint ``index`` needs for the userinfo its URL was given with."""
        auth = self.endpoint_auth[index] if index < len(self.endpoint_auth) else None
        if auth is None:
            return {}
        user, _, password = auth.get_secret_value().partition(":")
        token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def secrets(self) -> list[str]:
        """Every secret this config holds, as text, for :meth:`redact`."""
        found = [self.api_key.get_secret_value()]
        for index, auth in enumerate(self.endpoint_auth):
            if auth is not None:
                userinfo = auth.get_secret_value()
                found += [userinfo, unquote(userinfo), unquote(userinfo.partition(":")[2])]
                found += [self.endpoint_headers(index)["Authorization"].split(" ", 1)[1]]
        return [s for s in found if s and s != "EMPTY"]

    def redact(self, text: str) -> str:
        """``text`` (an error body, an exception message) with this config's secrets masked."""
        return redact_text(text, self.secrets())


PromptStyle = Literal["full", "compact"]
"""How much an experience-model prompt explains: everything (``"full"``, for any instructed model), or
only the case at hand (``"compact"``, for a model fine-tuned on the domain, which learned the rules)."""


AnswerFormat = Literal["json", "state"]
"""What an experience model writes: a JSON transition under structured decoding (``"json"``), or the next
state alone as plain text (``"state"``), for a model fine-tuned to it in a domain whose rules list the
actions and decide the ending."""


Setting = Literal["learned", "privileged"]
"""What a simulated world may know of the real one (:attr:`EnvConfig.setting`)."""


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
    max_state_chars: int = Field(
        DEFAULT_MAX_STATE_CHARS, ge=16, description="Cap on a predicted state (enforced in decoding)."
    )
    max_reasoning_chars: int = Field(1200, ge=0)
    max_admissible_actions: int = Field(64, ge=0)
    prompt_style: PromptStyle = Field(
        "full",
        description="'full': the domain's instructions and the answer format open every prompt; 'compact': "
        "only the case (task facts, demonstrations, state, action), for a model fine-tuned on the domain.",
    )
    answer_format: AnswerFormat = Field(
        "json",
        description="'json': the model answers a JSON transition (reasoning, next state, actions, done, "
        "success) under structured decoding; 'state': it answers the next state alone, in the domain's "
        "answer form, as plain text, and the domain lists the actions and rules the ending (about half "
        "the tokens of a JSON answer, for a model fine-tuned to it; TextWorld's shipped model).",
    )
    guided_answers: bool = Field(
        False,
        description="Where the domain writes out a step's possible outcomes (Domain.outcomes: TextWorld's "
        "take, drop, put, open of a container whose contents are known, a move into a room already seen: "
        "nothing happens, or it succeeds and the game goes on, is won or is lost), the model's answer is "
        "decoded as a choice among them (vLLM's structured outputs), so it judges the outcome and "
        "cannot get the bookkeeping wrong (a thing left both in a chest and carried). A step whose outcome "
        "shows something new (a room entered for the first time) is written by the model in the form the "
        "domain gives (Domain.answer_pattern, a regular expression: the new room has an exit back), so "
        "its invention agrees with what the episode showed. A step with one possible outcome (it cannot "
        "succeed) is the rules'. Needs answer_format='state'.",
    )
    reveal_temperature: float | None = Field(
        None,
        ge=0,
        description="With guided_answers, the sampling temperature of an answer that shows what the episode "
        "has not (Domain.answer_pattern: a room entered for the first time, a container's contents); the "
        "outcomes it chooses among stay greedy. Greedy decoding gives every new room the model's likeliest "
        "form; sampling draws it from what the model learned of the family's rooms. None: the backend's "
        "temperature.",
    )
    caps_in_schema: bool = Field(
        False,
        description=(
            "Also write the character caps into the output schema (maxLength). Off by default: under "
            "vLLM's xgrammar backend a capped string admits no escape sequence, so a model could never "
            "write a newline in a state; the caps are checked after parsing instead (a longer answer "
            "counts as unparsable)."
        ),
    )
    setting: Setting = Field(
        "privileged",
        description="What the simulator may know of the real world. 'learned' (DreamGym's setting): the "
        "experience model sees the task's instruction, its first state, the episode so far and "
        "demonstrations of other tasks; never the engine's hidden facts (Domain.task_fact_keys: layout, "
        "hidden contents, goal facts), and no real transition of the same task is replayed or shown. "
        "'privileged': the task's hidden facts are given to the model and the rules, and real "
        "transitions of the same task may answer its steps (replay_real).",
    )
    replay_real: bool = Field(
        True,
        description="In a deterministic domain (Domain.deterministic), answer a step with a real "
        "transition among its demonstrations that has the same task, state and action, without a request: "
        "the world is known to do that. False always asks the model. Only in the privileged setting.",
    )
    memo_size: int = Field(
        8_192,
        ge=0,
        description="In a deterministic domain, how many model answers an env remembers (a vector env: "
        "its sub-envs together), so a repeat of a step (same task, shown history, state and action) "
        "sends no request (dreamgym_env.experience.memo). 0 asks the model every time.",
    )
    parse_retries: int = Field(2, ge=0, description="New requests after an unparsable answer.")
    retry_temperature: float | None = Field(
        0.7,
        ge=0.0,
        description="Sampling temperature of a parse retry, whatever the backend's; None keeps the "
        "backend's. A greedy model (temperature 0) asked the same prompt again gives the same answer.",
    )
    on_invalid_output: Literal["raise", "fail_state"] = Field(
        "raise",
        description="After parse retries: raise ResponseFormatError, or return the unchanged state with "
        "reward 0 and info['model_error'] (the episode continues).",
    )
    store_transitions: Literal["all", "none"] = Field(
        "all", description="Whether simulated transitions are offered to the retriever's store."
    )
    backend: BackendConfig = Field(default_factory=BackendConfig)


def merge_overrides(config: EnvConfig | None, overrides: dict[str, Any]) -> EnvConfig:
    """Merge flat keyword overrides (``base_url=``, ``top_k=``...) into an :class:`EnvConfig`.

    Raises:
        ConfigError: an unknown keyword or an invalid value; the message lists what is accepted.
    """
    shown_by = secrets_gymnasium_would_show(overrides)
    if shown_by:
        raise ConfigError(
            f"gymnasium.make_vec(..., vectorization_mode={shown_by!r}) keeps every keyword in plain text in "
            "its vector env's spec (str(env.spec), env.spec.to_json()), so a key or a URL password given as "
            "a keyword would show there. Set DREAMGYM_API_KEY (and DREAMGYM_BASE_URL) in the environment "
            "instead, or use vectorization_mode='vector_entry_point', whose spec masks secrets."
        )
    try:  # the defaults read DREAMGYM_BASE_URL, which may be wrong
        base = config or EnvConfig()
    except ValidationError as e:
        raise ConfigError(f"Invalid configuration: {_describe(e)}") from e
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
    inherited = _explicit(base.backend)
    if "base_url" in backend_kw:
        inherited.pop("endpoint_auth")  # the old URLs' credentials are not the new ones'
    try:
        backend = BackendConfig.model_validate({**inherited, **backend_kw})
        chosen = {**_explicit(base), **env_kw, "backend": backend}
        set_by_user = set(env_kw) | set(backend_kw) | base.model_fields_set | base.backend.model_fields_set
        for key, value in _shipped_defaults(backend.model).items():
            if key not in set_by_user:
                if key in backend_fields:
                    chosen["backend"] = chosen["backend"].model_copy(update={key: value})
                else:
                    chosen[key] = value
        return EnvConfig.model_validate(chosen)
    except ValidationError as e:
        raise ConfigError(f"Invalid configuration: {_describe(e)}") from e


def validated(cls: type[M], /, **fields: Any) -> M:
    """``cls(**fields)``, with its validation errors as one :class:`ConfigError` that quotes no secret.

    For code that builds a config from values a user typed (the command line's flags): a bad value is
    then the package's error, naming each field and what it accepts, not pydantic's.
    """
    try:
        return cls(**fields)
    except ValidationError as e:
        raise ConfigError(f"Invalid configuration: {_describe(e)}") from e


def _shipped_defaults(model: str | None) -> dict[str, Any]:
    """The prompt settings a shipped model was trained with, when ``model`` names one (else nothing).

    A shipped model only answers well to the prompts it was trained on (its history window and number
    of demonstrations) and needs room for its answers, so naming it is enough; a keyword still wins.
    """
    if model not in SHIPPED_MODELS:
        return {}
    return {k: v for k, v in recommended_env_kwargs(model).items() if k != "model"}


_SECRET_FIELDS = {"api_key", "endpoint_auth", "base_url"}
"""Fields whose value is never quoted in an error: a key, or URLs that may carry one."""


def _describe(error: ValidationError) -> str:
    """Each problem as ``field: message (got VALUE)``, where the value is never a secret.

    A problem of the whole config (no field) quotes nothing: its input is every field, URLs included.
    """
    lines = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "config"
        line = f"{where}: {problem['msg']}"
        if problem["loc"] and problem["loc"][0] in _SECRET_FIELDS:
            line += f" (got a {type(problem.get('input')).__name__}; the value is not shown)"
        elif "input" in problem and problem["loc"]:
            line += f" (got {repr(problem['input'])[:200]})"
        lines.append(line)
    return f"{error.error_count()} problem(s): " + "; ".join(lines)


def _explicit(model: BaseModel) -> dict[str, Any]:
    """Fields as attributes (not dumped), so nested models and secrets survive re-validation."""
    return {name: getattr(model, name) for name in type(model).model_fields}
