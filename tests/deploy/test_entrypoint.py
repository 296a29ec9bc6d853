"""bin/console, the container's entry point, run for real outside a container.

This machine cannot build or run images (no container daemon), so the test does what the
containers of compose.yaml would do, in the same order, with the same commands and the same
kind of environment (Redis as the task broker and the cache): migrate an empty database,
collect static files, seed the demo people, then start ``web`` and ``worker`` as two separate
processes. A run started through the API must reach "waiting": the web server
took it and the worker advanced it. Both then stop on SIGTERM, as ``docker stop`` sends it.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
from django.conf import settings

from tests.deploy.scratch import scratch_database, scratch_redis
from tests.support.processes import (
    LOG_ROOT,
    ApiClient,
    ManagedProcess,
    free_port,
    logs_section,
    poll_until,
    process_env,
    wait_http_ready,
)
from tests.support.runs import is_waiting_for_a_person, pending_approvals, run_start, run_wait

pytestmark = pytest.mark.durability

ENTRYPOINT = Path(settings.BASE_DIR) / "bin" / "console"
INCIDENT = {"service": "checkout", "signal": "5xx at 7%", "severity": "sev2"}
# A host name first, as a deployment lists it: the health check must send that one, and the
# test's own clients reach the server as 127.0.0.1.
ALLOWED_HOSTS = "console.test,127.0.0.1"


def entrypoint_run(command: list[str], env: Mapping[str, str], *, timeout: float = 120.0) -> str:
    """Run ``bin/console <command>`` to its end; fail with its output unless it exits 0."""
    done = subprocess.run(
        [str(ENTRYPOINT), *command],
        env=dict(env),
        cwd="/",  # the entry point finds the project from its own path
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"bin/console {' '.join(command)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout + done.stderr


def program_of(pid: int) -> str:
    """The command line of a running process (Linux /proc; empty for a moment during exec)."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def redis_keys(url: str, pattern: str) -> list[bytes]:
    with redis.Redis.from_url(url) as client:
        return list(client.scan_iter(match=pattern))


def stop_gracefully(*processes: ManagedProcess, timeout: float = 30.0) -> dict[str, int]:
    """SIGTERM to each process itself (what ``docker stop`` sends to PID 1); their exit codes."""
    for process in processes:
        process.popen.send_signal(signal.SIGTERM)
    codes: dict[str, int] = {}
    for process in processes:
        try:
            codes[process.name] = process.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{process.name} ignored SIGTERM for {timeout}s\n{logs_section([process])}"
            ) from None
    return codes


@pytest.fixture
def deployment_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of compose.yaml's console services (the Redis broker and cache among
    them), on a new empty database."""
    db = settings.DATABASES["default"]
    with (
        scratch_database(db, tmp_path=tmp_path) as database_url,
        scratch_redis(db) as (redis_url, cache_url),
    ):
        key = base64.b64encode(os.urandom(32)).decode()
        yield process_env(
            database_url=database_url,
            extra={
                "Q_BROKER": "redis",
                "REDIS_URL": redis_url,
                "CACHE_URL": cache_url,
                "CONSOLE_PYTHON": sys.executable,
                "CONSOLE_VAR_DIR": str(tmp_path / "var"),
                "CONSOLE_STATIC_ROOT": str(tmp_path / "static"),
                "CHECKPOINT_SQLITE_PATH": "",  # beside the scratch database, not the suite's
                "DJANGO_REQUIRE_SECRET_KEY": "true",
                "SECRET_KEY": secrets.token_urlsafe(50),
                "ENCRYPTION_KEYS": f"k1:{key}",
                "ALLOWED_HOSTS": ALLOWED_HOSTS,
            },
        )


def test_entrypoint_migrates_an_empty_database_and_its_web_and_worker_take_a_run_to_waiting(
    request: pytest.FixtureRequest, deployment_env: dict[str, str], tmp_path: Path
):
    env = deployment_env
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The image collects static files at build, before any database exists: side by side.
        static = pool.submit(entrypoint_run, ["static"], env)
        assert "Applying agents.0001" in entrypoint_run(["migrate"], env)
        assert "alice" in entrypoint_run(["demo"], env)
        static.result()
    assert (tmp_path / "static" / "css").is_dir()

    port = free_port()
    env = {**env, "PORT": str(port)}  # the port the health check asks, as in the image
    log_dir = LOG_ROOT / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(log_dir, ignore_errors=True)  # this run's logs only
    web = ManagedProcess(
        name="web",
        command=[str(ENTRYPOINT), "web", "--host", "127.0.0.1", "--workers", "1"],
        env=env,
        log_path=log_dir / "web.log",
    )
    worker = ManagedProcess(
        name="worker", command=[str(ENTRYPOINT), "worker"], env=env, log_path=log_dir / "worker.log"
    )
    try:
        web.start()
        worker.start()
        base_url = f"http://127.0.0.1:{port}"
        wait_http_ready(f"{base_url}/login/", timeout=30, process=web)
        # The entry point replaced itself: the signals of a process manager reach the servers.
        assert "gunicorn" in program_of(web.popen.pid)
        poll_until(
            lambda: "qcluster" in program_of(worker.popen.pid),
            timeout=10,
            what="the worker's entry point to exec the qcluster",
            processes=[worker],
        )
        # The image's health check, against a page that exists today (and one that does not).
        assert "HTTP 200" in entrypoint_run(["healthcheck", "/login/"], env)
        missing = subprocess.run(
            [str(ENTRYPOINT), "healthcheck", "/no-such-page/"], env=env, capture_output=True
        )
        assert missing.returncode == 1, missing

        alice = ApiClient.login(base_url=base_url, username="alice", password="demo")
        try:
            run = run_start(alice, agent="incident_copilot", input=INCIDENT)
            waiting = run_wait(
                alice,
                run["id"],
                until=is_waiting_for_a_person,
                what="a pending approval",
                timeout=40,
                processes=[web, worker],
            )
        finally:
            alice.close()
        # `demo` dated a checkout deploy within the last hour: the copilot proposes rolling it back.
        assert [a["tool"] for a in pending_approvals(waiting)] == ["rollback_deploy"]
        # Through Redis, as in compose.yaml: the cluster reports there, the limits count there.
        assert redis_keys(env["REDIS_URL"], "django_q:console:cluster*")
        assert redis_keys(env["CACHE_URL"], ":1:*")

        codes = stop_gracefully(web, worker)
        assert codes == {"web": 0, "worker": 0}, logs_section([web, worker])
    finally:
        worker.kill()
        web.kill()
