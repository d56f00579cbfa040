"""Which store a location names, and how to show it without its password.

A location is either a SQLite file (or ``":memory:"``), the embedded default, or a PostgreSQL URL
(``postgresql://user:password@host:5432/dbname``, also ``postgres://``), the store a whole cluster can
share. Locations end up in logs, error messages, ``repr`` and ``stats()``; :func:`redact` is what they
go through first, so a password written in the URL never leaves the process.
"""

from __future__ import annotations

import re

from dreamgym_env._secrets import redact_url

_POSTGRES_SCHEMES = ("postgresql", "postgres")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_postgres_url(location: object) -> bool:
    """Whether ``location`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    if not isinstance(location, str):
        return False
    match = _SCHEME.match(location)
    return match is not None and match.group(1).lower() in _POSTGRES_SCHEMES


def redact(location: str) -> str:
    """``location`` as it may be shown: a SQLite path unchanged, a URL with its password masked."""
    return redact_url(location)
