"""Shared pytest fixtures.

Integration tests talk to one real vLLM OpenAI server for the whole session, serving the smoke model
the package builds offline (:mod:`dreamgym_env.serving`). Store tests run against SQLite and against a
real PostgreSQL: one throwaway cluster for the session (``initdb`` + ``pg_ctl`` on 127.0.0.1 and a
free port, deleted at the end), one fresh database per test.

A test whose dependency is missing (vLLM, PostgreSQL, matplotlib, a real environment package...)
skips, however it says so (a fixture here or ``pytest.importorskip``), unless ``DREAMGYM_NO_SKIPS=1``
(set by ``scripts/test.sh``, so in CI): then every skip is reported as a failure, and nothing goes
silently untested. The summary line counts the skips either way.

The trainers that cannot install beside this package (verl, verifiers) have venvs of their own
(``scripts/install_integrations.sh``): their tests that need the real package are marked ``verl`` or
``verifiers``, deselected (not skipped) where it does not import, and run by ``scripts/test.sh`` in
those venvs with ``DREAMGYM_REQUIRE`` set, under which a package that does not import is an error.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dreamgym_env.serving import (
    SMOKE_MODEL_NAME,
    SMOKE_SERVER_ARGS,
    VLLMServer,
    build_tiny_model,
    default_smoke_model_dir,
)

if TYPE_CHECKING:
    import openai

    from dreamgym_env.storage.pg_cluster import TemporaryPostgres

NO_SKIPS_ENV = "DREAMGYM_NO_SKIPS"
_DESELECTED = pytest.StashKey[list[str]]()

#: Trainers whose real packages cannot install beside this package's pins, so their adapters are
#: tested in a virtualenv each (made by ``scripts/install_integrations.sh``): marker -> (the module
#: the tests need, that venv). Tests marked with one run where the module imports and are deselected
#: (not skipped) elsewhere; ``scripts/test.sh`` runs each adapter's test file in its venv.
SEPARATE_VENVS = {
    "verl": ("verl.experimental.agent_loop.agent_loop", ".venv-verl"),
    "verifiers": ("verifiers.v1", ".venv-verifiers"),
}
#: Comma-separated markers of :data:`SEPARATE_VENVS` whose module must import in this run: set by
#: ``scripts/test.sh`` in those venvs, so a broken install fails instead of deselecting the tests.
REQUIRE_ENV = "DREAMGYM_REQUIRE"


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module.split(".")[0]) is not None


def pytest_configure(config: pytest.Config) -> None:
    for marker, (module, venv) in SEPARATE_VENVS.items():
        config.addinivalue_line(
            "markers",
            f"{marker}: needs the real {marker} package ({module}); runs in {venv} "
            "(scripts/install_integrations.sh), deselected where it is not installed",
        )
    for marker in filter(None, os.environ.get(REQUIRE_ENV, "").split(",")):
        module, venv = SEPARATE_VENVS[marker]
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise pytest.UsageError(
                f"{REQUIRE_ENV}={marker} but {module} does not import ({e!r}): "
                f"run scripts/install_integrations.sh and this file with {venv}/bin/python"
            ) from e


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests of a trainer whose package this interpreter lacks (see :data:`SEPARATE_VENVS`)."""
    absent = {m for m, (module, _) in SEPARATE_VENVS.items() if not _importable(module)}
    if not absent:
        return
    keep, drop, markers = [], [], set()
    for item in items:
        hit = {m for m in absent if item.get_closest_marker(m)}
        (drop if hit else keep).append(item)
        markers |= hit
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        config.stash[_DESELECTED] = sorted(markers)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Under ``DREAMGYM_NO_SKIPS=1``, a skip (of any origin) is reported as a failure that says why."""
    report: pytest.TestReport = yield
    if report.skipped and os.environ.get(NO_SKIPS_ENV) == "1" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"{reason}\n{NO_SKIPS_ENV}=1 forbids skipping: install what the test needs (scripts/install.sh)."
        )
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> pytest.CollectReport:
    """The same for a whole module skipped at import (a module-level ``pytest.importorskip``)."""
    report: pytest.CollectReport = yield
    if report.skipped and os.environ.get(NO_SKIPS_ENV) == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"{reason}\n{NO_SKIPS_ENV}=1 forbids skipping: install what the test needs (scripts/install.sh)."
        )
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The skip count on its own line, so a log shows at a glance whether anything went untested."""
    skipped = len(terminalreporter.stats.get("skipped", []))
    strict = os.environ.get(NO_SKIPS_ENV) == "1"
    terminalreporter.write_line(f"skipped tests: {skipped} ({NO_SKIPS_ENV}={'1' if strict else 'unset'})")
    absent = terminalreporter.config.stash.get(_DESELECTED, [])
    if absent:
        venvs = ", ".join(SEPARATE_VENVS[m][1] for m in absent)
        terminalreporter.write_line(
            f"deselected the tests marked {' or '.join(absent)}: they run in {venvs} (scripts/test.sh)"
        )


def _require(modules: tuple[str, ...], why: str) -> None:
    """Skip unless every module is importable (a failure under ``DREAMGYM_NO_SKIPS=1``)."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(
            f"{why} needs {', '.join(missing)}: install the CPU serving stack "
            '(pip install torch==2.13.0 && pip install "dreamgym-env[cpu]", see docs/serving.md)'
        )


@pytest.fixture(scope="session")
def smoke_model_dir() -> Path:
    """The offline smoke model, built once into the cache (``$DREAMGYM_CACHE_DIR`` or ``~/.cache``)."""
    _require(("torch", "transformers", "tokenizers"), "Building the smoke model")
    return build_tiny_model(default_smoke_model_dir())


@pytest.fixture(scope="session")
def vllm_server(smoke_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMServer]:
    """One real vLLM OpenAI server for the session; has ``.base_url`` and ``.model``.

    Started with :data:`~dreamgym_env.serving.SMOKE_SERVER_ARGS` (compact JSON under structured
    decoding, cached-token counts in ``usage``) and a 4096-token context. Tests must not stop or kill
    it; a test that needs a server to die starts its own :class:`~dreamgym_env.serving.VLLMServer`.
    """
    _require(("vllm",), "The vLLM server fixture")
    server = VLLMServer(
        smoke_model_dir,
        served_model_name=SMOKE_MODEL_NAME,
        max_model_len=4096,
        extra_args=SMOKE_SERVER_ARGS,
        log_path=tmp_path_factory.mktemp("vllm") / "server.log",
    )
    with server:
        yield server


@pytest.fixture(scope="session")
def openai_client(vllm_server: VLLMServer) -> openai.OpenAI:
    """A synchronous OpenAI client bound to :func:`vllm_server` (no retries: failures show at once)."""
    import openai

    return openai.OpenAI(base_url=vllm_server.base_url, api_key="unused", max_retries=0, timeout=120.0)


@pytest.fixture
def vllm_starts(monkeypatch: pytest.MonkeyPatch) -> list[VLLMServer]:
    """The servers ``dreamgym serve`` starts, with vLLM's start and the wait for SIGINT/SIGTERM faked.

    Nothing heavy runs behind a test's back: serving a shipped model or building a base raises (a test
    that needs a merge fakes it, or gives a real tiny base).
    """
    from dreamgym_env import cli
    from dreamgym_env.serving import vllm_server

    servers: list[VLLMServer] = []

    def start(self: VLLMServer) -> VLLMServer:
        servers.append(self)
        self.startup_seconds = 1.5
        return self

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a test of `dreamgym serve` built a base or served a shipped model")

    monkeypatch.setattr(vllm_server.VLLMServer, "start", start)
    monkeypatch.setattr(vllm_server, "require_vllm", lambda what: None)
    monkeypatch.setattr(cli, "_serve_until_signalled", lambda server: None, raising=False)
    monkeypatch.setattr("dreamgym_env.serving.shipped.serve_shipped_model", never)
    monkeypatch.setattr("dreamgym_env.training.merge.build_base", never)
    return servers


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[TemporaryPostgres]:
    """A throwaway PostgreSQL cluster for the session (``fsync`` off: only clients are killed in tests)."""
    from dreamgym_env.storage.pg_cluster import TemporaryPostgres, find_postgres_bindir

    missing = []
    if find_postgres_bindir() is None:
        missing.append("the PostgreSQL server binaries (initdb, pg_ctl; or set DREAMGYM_PG_BINDIR)")
    if importlib.util.find_spec("psycopg") is None or importlib.util.find_spec("psycopg_pool") is None:
        missing.append('psycopg and psycopg_pool (pip install "dreamgym-env[postgres]")')
    if missing:
        pytest.skip(f"PostgreSQL store tests need {' and '.join(missing)}")
    with TemporaryPostgres(fsync=False) as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: TemporaryPostgres) -> Iterator[str]:
    """The URL of a fresh database on :func:`postgres_cluster`, dropped after the test."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    url = postgres_cluster.create_database(name)
    yield url
    postgres_cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store test keeps its data: a fresh SQLite file, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    return str(request.getfixturevalue("postgres_url"))
