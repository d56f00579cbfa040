"""A throwaway PostgreSQL cluster: ``initdb`` in a temporary directory, served on 127.0.0.1.

For tests and benchmarks of the PostgreSQL stores on a machine that has the server binaries but no
running server. It listens on a free loopback port only (no Unix socket), requires a password
(``scram-sha-256``) and is deleted on :meth:`TemporaryPostgres.stop`. PostgreSQL refuses to run as
root; under root the cluster runs as the ``postgres`` user (or ``nobody``).

Example:
    >>> with TemporaryPostgres() as pg:
    ...     url = pg.create_database("buffer_test")
    ...     buffer = ReplayBuffer.open(url)
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from dreamgym_env.errors import StoreError


def find_postgres_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``: ``$DREAMGYM_PG_BINDIR``, ``PATH``, or Debian's layout."""
    candidates = [os.environ.get("DREAMGYM_PG_BINDIR")]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").is_file() and (Path(candidate) / "pg_ctl").is_file():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryPostgres:
    """A PostgreSQL cluster that lives as long as this object.

    Args:
        bindir: Directory of ``initdb`` and ``pg_ctl`` (default: :func:`find_postgres_bindir`).
        fsync: ``False`` trades crash safety of the *server* for speed (tests only: a killed client
            still loses exactly its uncommitted transaction either way).
        settings: Extra server settings (``{"max_connections": "200"}``).
    """

    user = "dreamgym"

    def __init__(
        self, bindir: str | Path | None = None, *, fsync: bool = True, settings: dict[str, str] | None = None
    ) -> None:
        found = Path(bindir) if bindir is not None else find_postgres_bindir()
        if found is None:
            raise StoreError(
                "no PostgreSQL server binaries found (initdb, pg_ctl): install PostgreSQL (e.g. apt-get "
                "install postgresql) or set DREAMGYM_PG_BINDIR to the directory holding them"
            )
        self.bindir = found
        self.password = secrets.token_hex(12)
        self.port = 0
        self.fsync = fsync
        self.settings = {"max_connections": "200", **(settings or {})}
        self.directory: Path | None = None
        self._run_as: str | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> TemporaryPostgres:
        """Create the cluster and start the server (a few seconds).

        If any step fails, the directory (and the password file in it) is deleted before the error
        is raised: ``with TemporaryPostgres()`` never reaches ``__exit__`` when ``start`` fails.
        """
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> TemporaryPostgres:
        self.directory = Path(tempfile.mkdtemp(prefix="dreamgym-pg-"))
        data, pwfile, log = self.directory / "data", self.directory / "pw", self.directory / "server.log"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            self._run_as = next((u for u in ("postgres", "nobody") if _user_exists(u)), None)
            if self._run_as is None:
                raise StoreError("PostgreSQL cannot run as root and neither 'postgres' nor 'nobody' exists")
            account = pwd.getpwnam(self._run_as)
            for path in (self.directory, pwfile):
                os.chown(path, account.pw_uid, account.pw_gid)
        self._run(
            "initdb", "-D", str(data), "-U", self.user, f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
            "--auth-local=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        pwfile.unlink()
        options = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": "''",
            "fsync": "on" if self.fsync else "off",
            **self.settings,
        }
        for attempt in range(3):
            self.port = _free_port()
            opts = " ".join(f"-c {k}={v}" for k, v in {**options, "port": str(self.port)}.items())
            try:
                self._run("pg_ctl", "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start")
                break
            except StoreError:
                if attempt == 2:
                    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    raise StoreError(f"the PostgreSQL server did not start; its log ends:\n{tail}") from None
        return self

    def stop(self) -> None:
        """Stop the server and delete the cluster (idempotent)."""
        if self.directory is None:
            return
        data = self.directory / "data"
        if (data / "postmaster.pid").exists():
            with contextlib.suppress(StoreError):
                self._run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ databases
    def url(self, dbname: str = "postgres") -> str:
        """The URL of database ``dbname`` on this cluster (with the password)."""
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create an empty database and return its URL."""
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, ending any connection still open to it."""
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.encode())

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self._run_as is not None:
            command = ["runuser", "-u", self._run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.directory, check=False)
        if done.returncode != 0:
            raise StoreError(f"{tool} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
