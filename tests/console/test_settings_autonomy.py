"""The advice's thresholds are read strictly from the environment (console/settings_autonomy.py)."""

from __future__ import annotations

import importlib

import pytest
from django.core.exceptions import ImproperlyConfigured

import console.settings_autonomy as module


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("AUTONOMY_PROMOTE_APPROVE_RATE", "1.2"),
        ("AUTONOMY_PROMOTE_APPROVE_RATE", "ninety"),
        ("AUTONOMY_DEMOTE_REJECT_RATE", "-0.1"),
        ("AUTONOMY_DEMOTE_UNDO_RATE", "2"),
        ("AUTONOMY_PROMOTE_MIN_VOLUME", "0"),
        ("AUTONOMY_PROMOTE_MIN_VOLUME", "fifty"),
        ("AUTONOMY_ADVICE_WINDOW_DAYS", "400"),
    ],
)
def test_a_bad_threshold_is_refused_naming_its_variable(monkeypatch, name, raw):
    monkeypatch.setenv(name, raw)
    try:
        with pytest.raises(ImproperlyConfigured, match=name):
            importlib.reload(module)
    finally:
        monkeypatch.delenv(name)
        importlib.reload(module)


def test_the_thresholds_default_to_the_documented_values(monkeypatch):
    for name in ("PROMOTE_APPROVE_RATE", "PROMOTE_MIN_VOLUME", "DEMOTE_REJECT_RATE"):
        monkeypatch.delenv(f"AUTONOMY_{name}", raising=False)
    monkeypatch.delenv("AUTONOMY_DEMOTE_UNDO_RATE", raising=False)
    monkeypatch.delenv("AUTONOMY_ADVICE_WINDOW_DAYS", raising=False)
    fresh = importlib.reload(module)
    assert (
        fresh.AUTONOMY_PROMOTE_APPROVE_RATE,
        fresh.AUTONOMY_PROMOTE_MIN_VOLUME,
        fresh.AUTONOMY_DEMOTE_REJECT_RATE,
        fresh.AUTONOMY_DEMOTE_UNDO_RATE,
        fresh.AUTONOMY_ADVICE_WINDOW_DAYS,
    ) == (0.95, 50, 0.20, 0.05, 30)


def test_a_valid_value_is_read(monkeypatch):
    monkeypatch.setenv("AUTONOMY_DEMOTE_UNDO_RATE", "0.1")
    try:
        assert importlib.reload(module).AUTONOMY_DEMOTE_UNDO_RATE == 0.1
    finally:
        monkeypatch.delenv("AUTONOMY_DEMOTE_UNDO_RATE")
        importlib.reload(module)
