"""Run the web server (gunicorn) and the background worker (qcluster) as one command.

Each child runs in its own process group, so a terminal's Ctrl-C reaches only this command,
which forwards a graceful stop to both children; when either child dies, the other is stopped
too and the command exits non-zero.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console.env import env_int

STOP_GRACE_SECONDS = 15.0
# The files prometheus_client's multiprocess mode writes: <type>_<process>.db.
METRICS_FILE_PREFIXES = ("counter_", "gauge_", "histogram_", "summary_")


def web_command(*, host: str, port: int, workers: int = 2, threads: int = 4) -> list[str]:
    """The gunicorn command line serving the console (whitenoise serves static files)."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "console.wsgi:application",
        "--bind",
        f"{host}:{port}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--access-logfile",
        "-",
        # The default control socket is one path per user, shared by every gunicorn running.
        "--no-control-socket",
    ]


def web_arguments_add(parser) -> None:
    """The web server's options, shared by ``serve`` and ``web`` (bin/console web)."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=env_int("PORT", 8000, minimum=1))
    parser.add_argument("--workers", type=int, default=2, help="web server processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per web process")


def worker_command() -> list[str]:
    """The django-q2 cluster that advances runs."""
    return [sys.executable, str(settings.BASE_DIR / "manage.py"), "qcluster"]


def metrics_dir_prepare() -> str:
    """The Prometheus multiprocess directory of the children, emptied: PROMETHEUS_MULTIPROC_DIR,
    or ``<CONSOLE_VAR_DIR>/prometheus``. Files of an earlier start would add dead processes'
    counts to this one's (Prometheus sees a restart as a counter reset, which it handles)."""
    path = settings.PROMETHEUS_MULTIPROC_DIR or str(settings.VAR_DIR / "prometheus")
    os.makedirs(path, exist_ok=True)
    # Only prometheus_client's own files: the setting may name a directory holding more (the
    # var dir itself, with the SQLite database), which a start must never delete.
    for old in Path(path).glob("*.db"):
        if old.name.startswith(METRICS_FILE_PREFIXES) and old.is_file():
            old.unlink(missing_ok=True)
    return path


def group_signal(process: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the child's whole process group (it is the group leader)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def children_stop(children: dict[str, subprocess.Popen], *, grace: float) -> None:
    """SIGTERM each child, then SIGKILL each child's group after ``grace``.

    The graceful signal goes to the leader only: gunicorn's master and the qcluster's main
    process stop their own workers, and hang if those die under them first.
    """
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in children.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
    for child in children.values():
        # Also reaps grandchildren (gunicorn workers, qcluster workers) left in the group.
        group_signal(child, signal.SIGKILL)
        child.wait()


class Command(BaseCommand):
    help = "Start the web server and the background worker together; Ctrl-C stops both."

    def add_arguments(self, parser) -> None:
        web_arguments_add(parser)

    def handle(self, *args, host: str, port: int, workers: int, threads: int, **options) -> None:
        commands = {
            "web server": web_command(host=host, port=port, workers=workers, threads=threads),
            "worker": worker_command(),
        }
        stop_requested: list[int] = []
        # gunicorn's workers and the qcluster's write their counters and histograms here; a
        # scrape of any web worker adds them all up (core/prometheus.py).
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir_prepare()}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop_requested.append(signum)

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        children: dict[str, subprocess.Popen] = {}
        try:
            for name, command in commands.items():
                children[name] = subprocess.Popen(
                    command, cwd=settings.BASE_DIR, start_new_session=True, env=env
                )
            self.stdout.write(self.style.SUCCESS(f"Console running at http://{host}:{port}/"))
            self.stdout.write(
                "Log in as alice, bob, carol, dave, erin, frank or admin (password: demo; README: who is who)."
            )
            self.stdout.write("Press Ctrl-C to stop the web server and the worker.")
            died = self._wait(children, stop_requested)
        finally:
            children_stop(children, grace=STOP_GRACE_SECONDS)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if died:
            name, code = died
            raise CommandError(f"the {name} exited with code {code}; stopped everything")
        self.stdout.write("Stopped.")

    @staticmethod
    def _wait(
        children: dict[str, subprocess.Popen], stop_requested: list[int]
    ) -> tuple[str, int] | None:
        """Block until a stop signal (None) or until a child dies ((name, exit code))."""
        while not stop_requested:
            for name, child in children.items():
                code = child.poll()
                if code is not None:
                    return name, code
            time.sleep(0.2)
        return None
