"""Which store a location names, and how to show it without its password.

A location is either a SQLite file (or ``":memory:"``), the embedded default, or a PostgreSQL URL
(``postgresql://user:password@host:5432/dbname``, also ``postgres://``), the store a whole cluster can
share. Locations end up in logs, error messages, ``repr`` and ``stats()``; :func:`redact` is what they
go through first, so a password written in the URL never leaves the process.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["POSTGRES_SCHEMES", "is_postgres_url", "redact"]

POSTGRES_SCHEMES = ("postgresql", "postgres")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_postgres_url(location: object) -> bool:
    """Whether ``location`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    if not isinstance(location, str):
        return False
    match = _SCHEME.match(location)
    return match is not None and match.group(1).lower() in POSTGRES_SCHEMES


def redact(location: str) -> str:
    """``location`` with any password replaced by ``***`` (in the user part and in ``?password=``).

    A SQLite path comes back unchanged. A URL that cannot be parsed comes back as its scheme only,
    so nothing that may hold a secret is ever shown.
    """
    if not _SCHEME.match(location):
        return location
    try:
        parts = urlsplit(location)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{host}"
        query = parts.query
        if query:
            pairs = [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(query, True)]
            query = urlencode(pairs, safe="*/:=%")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return f"{location.split('://', 1)[0]}://***"
