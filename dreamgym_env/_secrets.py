"""Keep API keys (and keys written into endpoint URLs) out of everything that gets printed or saved.

A key enters as ``api_key=`` or as the userinfo of a URL (``https://user:KEY@host/v1``). Inside the
package it lives in a pydantic ``SecretStr``; at the boundaries where text leaves (error messages,
logs, ``repr``, recordings, Gymnasium's ``env.spec``) it is replaced by :data:`MASK`.

``gymnasium.make`` keeps every keyword it was given in ``env.spec.kwargs`` and sets that spec on the
env after constructing it, so the env classes take :class:`SpecWithoutSecrets` first in their bases:
its ``spec`` setter swaps each secret for a :class:`Redacted` value before storing the spec.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterable
from types import FrameType
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from gymnasium.envs.registration import EnvSpec
from pydantic import SecretStr

from dreamgym_env.tasks import tasks_as_dicts

MASK = "**********"  # what pydantic's SecretStr shows, so every masked value looks the same

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_BEARER = re.compile(r"(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.I)


class Redacted(str):
    """A secret as an env spec keeps it: a ``str`` whose text is masked, carrying the real value.

    It prints, compares and serialises (``repr``, ``str(spec)``, ``spec.to_json()``) as its masked
    text, yet ``gymnasium.make(env.spec)`` in this process, or in one it is pickled to, still
    configures the backend, because :class:`~dreamgym_env.config.BackendConfig` unwraps it. A spec
    read back from JSON holds only the mask: the key then comes from ``DREAMGYM_API_KEY``.
    """

    secret: Any

    def __new__(cls, shown: str, secret: Any) -> Redacted:
        obj = super().__new__(cls, shown)
        obj.secret = secret
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (Redacted, (str.__str__(self), self.secret))

    def __deepcopy__(self, memo: dict[int, Any]) -> Redacted:
        return self  # immutable, like str


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@`` part, and that part (``None`` when there is none)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=host)), userinfo


def redact_url(url: str) -> str:
    """``url`` with its secrets masked: the password of its userinfo and any ``password=`` query value.

    ``user:KEY@host`` keeps the user (``user:**********@host``); a lone ``KEY@host`` (an API key written
    as the user) is masked whole. A path or anything without a scheme comes back unchanged; a URL that
    cannot be parsed comes back as its scheme only, so nothing that may hold a secret is shown.
    """
    if not _SCHEME.match(url):
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0] + ":" if ":" in userinfo else ""
            netloc = f"{user}{MASK}@{host}"
        query = parts.query
        if query:
            pairs = [(k, MASK if k.lower() == "password" else v) for k, v in parse_qsl(query, True)]
            query = urlencode(pairs, safe="*/:=%")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return f"{url.split('://', 1)[0]}://{MASK}"


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every given secret, and any ``Bearer``/``Basic`` credential, replaced by the mask.

    For text that comes from outside (a server's error body may echo the request's headers).
    """
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)


def redact_endpoint_text(text: str, url: str, api_key: str | None = None) -> str:
    """``text`` (a message about the endpoint ``url``) with the URL's credentials and ``api_key`` masked.

    For clients that talk to an endpoint of their own (a policy server, an embedding server): the URL
    is shown as :func:`redact_url` shows it, and the key, or one written into the URL, nowhere.
    """
    _, userinfo = split_userinfo(url)
    secrets = [] if userinfo is None else [userinfo, userinfo.split(":", 1)[-1]]
    if api_key and api_key != "EMPTY":
        secrets.append(api_key)
    return redact_text(text.replace(url, redact_url(url)), secrets)


def _redact_urls(value: Any) -> Any:
    if isinstance(value, Redacted):
        return value
    if isinstance(value, str):
        urls = [u.strip() for u in value.split(",")]
        if any(split_userinfo(u)[1] is not None for u in urls):
            return Redacted(",".join(redact_url(u) for u in urls), value)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_redact_urls(u) for u in value)
    return value


def redact_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``gymnasium.make`` keywords with ``api_key`` and URL userinfo made :class:`Redacted`."""
    out = dict(kwargs)
    key = out.get("api_key")
    if key is not None and not isinstance(key, Redacted):
        out["api_key"] = Redacted(MASK, key if isinstance(key, SecretStr) else SecretStr(str(key)))
    if "base_url" in out:
        out["base_url"] = _redact_urls(out["base_url"])
    return out


def secrets_gymnasium_would_show(kwargs: dict[str, Any]) -> str | None:
    """The ``make_vec`` mode that would keep a secret of ``kwargs`` in plain text, or ``None``.

    In ``"sync"`` and ``"async"`` modes, ``gymnasium.make_vec`` builds Gymnasium's own vector env
    and sets on it a spec holding every keyword as given; no class of this package is there to mask
    it. The sub-envs (``async``: the first, built in the caller's process to read the spaces) are
    made inside that call, so an env's constructor finds it on the stack and can refuse the key.
    """
    key, urls = kwargs.get("api_key"), kwargs.get("base_url")
    try:
        plain_url_secret = _redact_urls(urls) != urls
    except ValueError:  # not a URL at all: the config's validation says so, without quoting it
        plain_url_secret = False
    if (key is None or isinstance(key, Redacted)) and not plain_url_secret:
        return None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if (
            frame.f_code.co_name == "make_vec"
            and frame.f_globals.get("__name__") == "gymnasium.envs.registration"
        ):
            mode = frame.f_locals.get("vectorization_mode")
            value = str(getattr(mode, "value", mode))
            return value if value in ("sync", "async") else None
        frame = frame.f_back
    return None


class SpecWithoutSecrets:
    """Mixin for env classes: ``env.spec`` never holds a key in plain text, and serialises to JSON.

    Gymnasium assigns ``env.unwrapped.spec`` after construction, with ``kwargs`` exactly as given to
    ``gymnasium.make`` / ``make_vec``; the setter stores a copy whose secrets are :class:`Redacted`
    and whose ``tasks`` (a list of :class:`~dreamgym_env.records.Task`) are their JSON-ready dicts
    (:func:`~dreamgym_env.tasks.tasks_as_dicts`), which the envs take back: ``env.spec.to_json()``
    works, and ``gymnasium.make(EnvSpec.from_json(...))`` makes the env with the same tasks.
    """

    _redacted_spec: EnvSpec | None = None

    @property
    def spec(self) -> EnvSpec | None:
        """The spec this env was made from, secrets masked."""
        return self._redacted_spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        if value is not None and value.kwargs:
            kwargs = redact_kwargs(value.kwargs)
            if "tasks" in kwargs:
                kwargs["tasks"] = tasks_as_dicts(kwargs["tasks"])
            value = dataclasses.replace(value, kwargs=kwargs)
        self._redacted_spec = value
