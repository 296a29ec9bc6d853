"""The retention settings are read strictly: a bad value stops start-up naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.console.test_settings import ROOT, _start_django


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CHECKPOINT_RETENTION_DAYS", "a month"),
        ("CHECKPOINT_RETENTION_DAYS", "-1"),
        ("CHECKPOINT_RETENTION_ACTION", "archive"),
        ("CHECKPOINT_PRUNE_BATCH", "0"),
    ],
)
def test_a_bad_retention_value_names_the_variable(variable, value):
    result = _start_django(**{variable: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert variable in result.stderr.splitlines()[-1]


def test_good_retention_values_start():
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.CHECKPOINT_RETENTION_DAYS, s.CHECKPOINT_RETENTION_ACTION, s.CHECKPOINT_PRUNE_BATCH)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "CHECKPOINT_RETENTION_DAYS": "0",
        "CHECKPOINT_RETENTION_ACTION": "DELETE",
        "CHECKPOINT_PRUNE_BATCH": "50",
    }
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "delete", "50"]
