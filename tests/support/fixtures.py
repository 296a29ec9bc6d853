"""Fixtures for tests that drive real processes. Import them into a conftest.py:

from tests.support.fixtures import api_client_for, page_client_for, processes  # noqa: F401
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from console.management.commands.serve import worker_command
from tests.support.factories import DEMO_PASSWORD
from tests.support.processes import (
    LOG_ROOT,
    ApiClient,
    ManagedProcess,
    PageClient,
    WebServer,
    database_url_for_tests,
    free_port,
    process_env,
)


class ProcessSet:
    """The real processes of one test; everything still running is killed at teardown."""

    def __init__(self, *, test_name: str) -> None:
        self.log_dir = LOG_ROOT / re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name)
        shutil.rmtree(self.log_dir, ignore_errors=True)  # logs of this test's last run only
        self.database_url = database_url_for_tests()
        self.web_server: WebServer | None = None
        self.workers: dict[str, ManagedProcess] = {}

    @property
    def all(self) -> list[ManagedProcess]:
        procs: list[ManagedProcess] = list(self.workers.values())
        if self.web_server is not None:
            procs.insert(0, self.web_server)
        return procs

    def web(self, *, env: Mapping[str, str] | None = None) -> WebServer:
        """Start the web server (once per test; restart it with ``.start()`` after a kill)."""
        if self.web_server is not None:
            raise RuntimeError("the web server exists already: call .start() on it to restart")
        self.web_server = WebServer(
            name="web",
            env=process_env(database_url=self.database_url, extra=env),
            log_path=self.log_dir / "web.log",
            port=free_port(),
        )
        return self.web_server.start()

    def worker(
        self,
        *,
        name: str = "qcluster",
        sandbox_delay_s: float = 0.0,
        env: Mapping[str, str] | None = None,
    ) -> ManagedProcess:
        """Start a qcluster; restart it later with ``.start(env=...)`` after a kill."""
        if name in self.workers:
            raise RuntimeError(f"worker {name!r} exists already: call .start() on it to restart")
        extra = {"SANDBOX_EFFECT_DELAY_S": str(sandbox_delay_s), **(env or {})}
        worker = ManagedProcess(
            name=name,
            command=worker_command(),
            env=process_env(database_url=self.database_url, extra=extra),
            log_path=self.log_dir / f"{name}.log",
        )
        self.workers[name] = worker
        return worker.start()

    def kill_all(self) -> None:
        for proc in self.all:
            proc.kill()


def schedules_restore() -> None:
    """Re-install the periodic jobs that migrations install (module-level SCHEDULES + install).

    The flush that ends every transactional test empties the schedule table; the processes
    should run with the same periodic jobs (run recovery, sweeps) as production.
    """
    loader = MigrationLoader(connection, ignore_no_migrations=True)
    for _, migration in sorted(loader.disk_migrations.items()):
        module = sys.modules[migration.__module__]
        if hasattr(module, "SCHEDULES") and callable(getattr(module, "install", None)):
            module.install(apps, None)


@pytest.fixture
def processes(request: pytest.FixtureRequest, transactional_db: None) -> Iterator[ProcessSet]:
    """Real processes against the test database.

    Depends on ``transactional_db`` so the processes die before the database is flushed.
    """
    schedules_restore()
    procs = ProcessSet(test_name=request.node.name)
    try:
        yield procs
    finally:
        procs.kill_all()


@pytest.fixture
def api_client_for(processes: ProcessSet) -> Iterator[Callable[..., ApiClient]]:
    """``api_client_for(user)``: a token client of the test's web server (started if needed)."""
    clients: list[ApiClient] = []

    def make(user: Any, *, password: str = DEMO_PASSWORD) -> ApiClient:
        web = processes.web_server or processes.web()
        client = ApiClient.login(
            base_url=web.base_url, username=user.get_username(), password=password
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def page_client_for(processes: ProcessSet) -> Iterator[Callable[..., PageClient]]:
    """``page_client_for(user)``: a logged-in page session of the test's web server."""
    clients: list[PageClient] = []

    def make(user: Any, *, password: str = DEMO_PASSWORD) -> PageClient:
        web = processes.web_server or processes.web()
        client = PageClient(base_url=web.base_url, username=user.get_username(), password=password)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
