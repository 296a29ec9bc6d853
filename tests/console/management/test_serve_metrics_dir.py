"""manage.py serve gives gunicorn and the qcluster one Prometheus directory, emptied at start."""

from __future__ import annotations

import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from console.management.commands import serve


def reporter(out, *, then: str) -> list[str]:
    """A child that writes its PROMETHEUS_MULTIPROC_DIR and what is in it, then does ``then``."""
    code = (
        "import os, sys, time\n"
        "where = os.environ.get('PROMETHEUS_MULTIPROC_DIR', '')\n"
        f"open({str(out)!r}, 'w').write(where + '|' + ','.join(sorted(os.listdir(where))))\n"
        f"{then}\n"
    )
    return [sys.executable, "-c", code]


def test_both_children_share_one_emptied_metrics_directory(monkeypatch, tmp_path, settings):
    shared = tmp_path / "prometheus"
    shared.mkdir()
    (shared / "counter_12345.db").write_bytes(b"from an earlier start")
    settings.PROMETHEUS_MULTIPROC_DIR = str(shared)
    web, worker = tmp_path / "web", tmp_path / "worker"
    monkeypatch.setattr(serve, "web_command", lambda **kw: reporter(web, then="time.sleep(60)"))
    # The worker ends the command, once the web child had time to write.
    ending = "time.sleep(1.5); sys.exit(3)"
    monkeypatch.setattr(serve, "worker_command", lambda: reporter(worker, then=ending))
    with pytest.raises(CommandError, match="worker exited with code 3"):
        call_command("serve", port=8999, stdout=StringIO())
    for out in (web, worker):
        assert out.read_text() == f"{shared}|"  # the same directory, the stale file gone


def test_without_a_setting_the_directory_is_under_the_var_dir(settings, tmp_path):
    settings.PROMETHEUS_MULTIPROC_DIR = ""
    settings.VAR_DIR = tmp_path
    assert serve.metrics_dir_prepare() == str(tmp_path / "prometheus")
    assert (tmp_path / "prometheus").is_dir()


def test_a_metrics_directory_set_to_the_var_dir_loses_only_the_metrics_files(settings, tmp_path):
    # PROMETHEUS_MULTIPROC_DIR pointed at CONSOLE_VAR_DIR itself (an easy slip): emptying it
    # at start must not take the SQLite database or anything else with it.
    (tmp_path / "console.sqlite3").write_bytes(b"the database")
    (tmp_path / "staticfiles").mkdir()
    (tmp_path / "staticfiles" / "console.css").write_text("body {}")
    (tmp_path / "counter_12345.db").write_bytes(b"from an earlier start")
    (tmp_path / "histogram_web-1-7.db").write_bytes(b"from an earlier start")
    settings.PROMETHEUS_MULTIPROC_DIR = str(tmp_path)

    assert serve.metrics_dir_prepare() == str(tmp_path)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["console.sqlite3", "staticfiles"]
    assert (tmp_path / "staticfiles" / "console.css").read_text() == "body {}"
