"""Real web server and worker processes against the test database, for durability tests.

Each process runs in its own process group (so ``kill()`` takes its workers with it), reads
the test database through ``DATABASE_URL``, uses short queue and lease timings, and logs to
``var/test-logs/<test>/<name>.log``. Tests that use them need committed data
(``transactional_db``), because other processes cannot see an open test transaction.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from django.conf import settings
from django.db import connection

from console.management.commands.serve import web_command
from tests.support.throttling import PROCESS_RATES

T = TypeVar("T")

LOG_ROOT = Path(settings.BASE_DIR) / "var" / "test-logs"

# Short timings so a killed worker's task comes back within seconds (Q_RETRY > Q_TIMEOUT).
FAST_TIMINGS: dict[str, str] = {
    "Q_SYNC": "false",
    "Q_BROKER": "orm",
    "Q_TIMEOUT": "6",
    "Q_RETRY": "8",
    "Q_POLL": "0.2",
    "RUN_LEASE_SECONDS": "4",
    "RUN_HEARTBEAT_SECONDS": "1",
    "SANDBOX_EFFECT_DELAY_S": "0",
    # A call that timed out is taken as "never acted" (by the sweep or a person) this long after.
    "EFFECT_SETTLE_AFTER_SECONDS": "10",
}


def database_url_for_tests() -> str:
    """A DATABASE_URL naming the database this test process uses (the test database)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    if connection.vendor == "postgresql":
        user = quote(db.get("USER") or "", safe="")
        password = quote(db.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = db.get("HOST") or "127.0.0.1"
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(db['NAME'], safe='')}"
    raise RuntimeError(f"durability tests do not support {connection.vendor}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_env(*, database_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: ours, the given database, fast timings, then ``extra``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(FAST_TIMINGS)
    env.update(PROCESS_RATES)
    env["DATABASE_URL"] = database_url
    env["DJANGO_SETTINGS_MODULE"] = "console.settings"
    env["PYTHONUNBUFFERED"] = "1"
    if settings.CHECKPOINT_SQLITE_PATH:
        env["CHECKPOINT_SQLITE_PATH"] = settings.CHECKPOINT_SQLITE_PATH
    env.update(extra or {})
    return env


class ManagedProcess:
    """One child process (and its process group) that can be started, killed and restarted."""

    def __init__(
        self,
        *,
        name: str,
        command: list[str],
        env: dict[str, str],
        log_path: Path,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.cwd = cwd or settings.BASE_DIR
        self.command = command
        self.env = env
        self.log_path = log_path
        self.popen: subprocess.Popen | None = None
        self.starts = 0

    def start(self, *, env: Mapping[str, str] | None = None) -> ManagedProcess:
        """Start (again); ``env`` overrides variables for this and later starts."""
        if self.is_alive:
            raise RuntimeError(f"{self.name} is already running (pid {self.popen.pid})")
        self.env = {**self.env, **(env or {})}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with self.log_path.open("ab") as log:
            stamp = dt.datetime.now().isoformat(timespec="milliseconds")
            log.write(f"===== start #{self.starts} of {self.name} at {stamp} =====\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    @property
    def is_alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL, *, timeout: float = 15.0) -> None:
        """Send ``sig`` to the whole process group and wait for the leader to exit."""
        if self.popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=timeout)
        if sig != signal.SIGKILL:
            # Whatever the graceful signal left behind in the group goes now.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        with self.log_path.open("ab") as log:
            log.write(f"===== {self.name} killed with {signal.Signals(sig).name} =====\n".encode())

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log yet)"
        return "\n".join(text.splitlines()[-lines:])


class WebServer(ManagedProcess):
    """gunicorn on a fixed free port, kept across restarts so API clients stay valid."""

    def __init__(self, *, name: str, env: dict[str, str], log_path: Path, port: int) -> None:
        self.port = port
        command = web_command(host="127.0.0.1", port=port, workers=1, threads=4)
        super().__init__(name=name, command=command, env=env, log_path=log_path)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, env: Mapping[str, str] | None = None, timeout: float = 30.0) -> WebServer:
        super().start(env=env)
        wait_http_ready(f"{self.base_url}/login/", timeout=timeout, process=self)
        return self


def wait_http_ready(
    url: str, *, timeout: float = 30.0, process: ManagedProcess | None = None
) -> None:
    """Wait until ``url`` answers with anything below 500; fail early if ``process`` dies."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        if process is not None and not process.is_alive:
            raise AssertionError(
                f"{process.name} exited with code {process.popen.returncode} before {url} "
                f"answered\n{logs_section([process])}"
            )
        try:
            response = httpx.get(url, timeout=2.0)
            if response.status_code < 500:
                return
            last_error = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last_error = repr(exc)
        time.sleep(0.2)
    procs = [process] if process else []
    raise AssertionError(f"{url} not ready after {timeout}s ({last_error})\n{logs_section(procs)}")


def logs_section(processes: Iterable[ManagedProcess], lines: int = 40) -> str:
    parts = [
        f"--- last {lines} lines of {proc.log_path} ---\n{proc.log_tail(lines)}"
        for proc in processes
    ]
    return "\n".join(parts)


def poll_until(
    probe: Callable[[], T],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    processes: Iterable[ManagedProcess] = (),
    describe: Callable[[], Any] | None = None,
) -> T:
    """Call ``probe`` until it returns something truthy, and return that.

    On timeout, fail with ``what``, the last value seen (or ``describe()``), and the tail of
    each process log. ``probe`` may raise AssertionError to fail at once (e.g. on a run that
    ended in a state it can never leave).
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    seen = describe() if describe is not None else last
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what}; last seen: {seen!r}\n"
        f"{logs_section(list(processes))}"
    )


# gunicorn closes a kept-alive connection after 2 s idle (its default ``keepalive``); httpx keeps
# one up to 5 s. A request sent on a connection at the instant the server closes it fails with
# "Server disconnected without sending a response" (seen in the chaos test, whose loop idles
# while a killed worker restarts): the clients drop idle connections first.
CLIENT_LIMITS = httpx.Limits(keepalive_expiry=1.0)


class ApiClient:
    """A token-authenticated JSON client for the real web server."""

    def __init__(self, *, base_url: str, token: str, username: str) -> None:
        self.username = username
        self.http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Token {token}"},
            timeout=15.0,
            limits=CLIENT_LIMITS,
        )

    @classmethod
    def login(cls, *, base_url: str, username: str, password: str) -> ApiClient:
        response = httpx.post(
            f"{base_url}/api/auth/token/",
            json={"username": username, "password": password},
            timeout=15.0,
        )
        body = expect_status(response, 200)
        return cls(base_url=base_url, token=body["token"], username=username)

    def get(self, path: str, *, expect: int = 200) -> Any:
        return expect_status(self.http.get(path), expect)

    def post(self, path: str, data: Mapping[str, Any], *, expect: int | tuple[int, ...]) -> Any:
        return expect_status(self.http.post(path, json=dict(data)), expect)

    def close(self) -> None:
        self.http.close()


def expect_status(response: httpx.Response, expect: int | tuple[int, ...]) -> Any:
    """The JSON body of ``response``, after checking its status code."""
    expected = (expect,) if isinstance(expect, int) else expect
    if response.status_code not in expected:
        raise AssertionError(
            f"{response.request.method} {response.request.url} -> {response.status_code}, "
            f"expected {expected}: {response.text[:2000]}"
        )
    return response.json() if response.content else None


class PageClient:
    """A browser-like session of the real web server (session cookie, CSRF token), for what a
    person does on the console's pages that no JSON API offers (fork a run, settle an effect).
    Redirects are not followed: a form answers 302 and the caller reads where it points."""

    def __init__(self, *, base_url: str, username: str, password: str) -> None:
        self.username = username
        self.http = httpx.Client(
            base_url=base_url, timeout=15.0, follow_redirects=False, limits=CLIENT_LIMITS
        )
        self.get("/login/")
        response = self.post("/login/", {"username": username, "password": password})
        if response.status_code != 302:
            raise AssertionError(f"login of {username} -> {response.status_code}")

    def get(self, path: str) -> str:
        response = self.http.get(path)
        if response.status_code != 200:
            raise AssertionError(f"GET {path} as {self.username} -> {response.status_code}")
        return response.text

    def post(self, path: str, data: Mapping[str, str]) -> httpx.Response:
        """Submit a form; anything but a redirect or a page is an error."""
        form = {"csrfmiddlewaretoken": self.http.cookies.get("csrftoken", ""), **data}
        response = self.http.post(path, data=form)
        if response.status_code not in (200, 302):
            raise AssertionError(
                f"POST {path} as {self.username} -> {response.status_code}: {response.text[:2000]}"
            )
        return response

    def close(self) -> None:
        self.http.close()
