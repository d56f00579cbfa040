"""Opening the package's durable stores: SQLite (embedded default) or PostgreSQL (one store for a cluster).

The replay buffer, the curriculum's task pool and recordings open SQLite through
:func:`open_sqlite`, so every file gets the same settings and checks. A ``postgresql://`` location
selects the PostgreSQL stores instead (:mod:`dreamgym_env.storage.postgres`); :func:`redact` is how a
location is shown anywhere (logs, errors, ``repr``), never with its password.

Every SQL statement of the package lives in this package, beside the tables it runs on: the replay
buffer's (:mod:`.transitions`, with each engine's own in :mod:`.transitions_sqlite` and
:mod:`.transitions_postgres`), the curriculum's task pool's (:mod:`.task_pool`) and the recordings'
(:mod:`.recordings`). The modules that use them speak in transitions, tasks and calls.
"""

from __future__ import annotations

from dreamgym_env.storage.sqlite import open_sqlite, write_transaction
from dreamgym_env.storage.urls import is_postgres_url, redact

__all__ = ["is_postgres_url", "open_sqlite", "redact", "write_transaction"]
