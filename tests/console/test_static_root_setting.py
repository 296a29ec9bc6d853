"""CONSOLE_STATIC_ROOT: where static files are collected and served (the image sets it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def static_root_with(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "CONSOLE_STATIC_ROOT"}
    clean.update(env, DJANGO_SETTINGS_MODULE="console.settings")
    return subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.STATIC_ROOT)"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_static_root_defaults_to_staticfiles_in_the_var_dir(tmp_path):
    done = static_root_with(CONSOLE_VAR_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "staticfiles")


def test_static_root_can_live_outside_the_var_dir(tmp_path):
    done = static_root_with(CONSOLE_VAR_DIR=str(tmp_path / "var"), CONSOLE_STATIC_ROOT="/srv/s")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "/srv/s"


def test_a_relative_static_root_stops_start_up_naming_the_variable():
    done = static_root_with(CONSOLE_STATIC_ROOT="staticfiles")
    assert done.returncode != 0
    assert "ImproperlyConfigured: CONSOLE_STATIC_ROOT must be an absolute path" in done.stderr
