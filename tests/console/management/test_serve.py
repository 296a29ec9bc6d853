"""manage.py serve: two children in their own process groups, stopped together."""

from __future__ import annotations

import os
import signal
import sys
import threading
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from console.management.commands import serve


def sleeper(marker: Path) -> list[str]:
    """A child that writes ``marker`` when it receives SIGTERM, then exits."""
    code = (
        "import signal, sys, time\n"
        f"def stop(*_):\n    open({str(marker)!r}, 'w').write('term'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "time.sleep(60)\n"
    )
    return [sys.executable, "-c", code]


def test_a_dying_child_stops_the_other_and_fails_the_command(monkeypatch, tmp_path):
    marker = tmp_path / "web-stopped"
    monkeypatch.setattr(serve, "web_command", lambda **kwargs: sleeper(marker))
    # The worker dies a moment after start, once the web child has installed its handler.
    crash = "import time; time.sleep(1.5); raise SystemExit(3)"
    monkeypatch.setattr(serve, "worker_command", lambda: [sys.executable, "-c", crash])

    with pytest.raises(CommandError, match="worker exited with code 3"):
        call_command("serve", port=8999, stdout=StringIO())
    assert marker.read_text() == "term"


def test_sigterm_to_the_command_stops_both_children(monkeypatch, tmp_path):
    web_marker, worker_marker = tmp_path / "web", tmp_path / "worker"
    monkeypatch.setattr(serve, "web_command", lambda **kwargs: sleeper(web_marker))
    monkeypatch.setattr(serve, "worker_command", lambda: sleeper(worker_marker))
    out = StringIO()
    # The children need a moment to install their handler before the stop arrives.
    timer = threading.Timer(1.5, os.kill, args=(os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        call_command("serve", port=8999, stdout=out)
    finally:
        timer.cancel()
    assert web_marker.read_text() == worker_marker.read_text() == "term"
    assert "http://127.0.0.1:8999/" in out.getvalue()
    assert out.getvalue().rstrip().endswith("Stopped.")


def test_the_web_server_is_gunicorn_on_the_requested_address():
    command = serve.web_command(host="127.0.0.1", port=8123, workers=2, threads=4)
    assert command[1:4] == ["-m", "gunicorn", "console.wsgi:application"]
    assert "127.0.0.1:8123" in command
