"""The faults chaos test lets a cancelled run's fault go uninjected when "a kill cut the call".
As first written (``role == "cancel_running" and downstream_row(effect) is None``) that held for
every cancel_running run with a ``before`` fault whatever happened, since a ``before`` fault
never reaches the downstream: the check that its fault was injected at all was gone. A cut now
needs a kill that landed while the effect was claimed."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from tests.support.chaos import TICKET, Planned, call_cut_by_kill

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 12, 2, 3, 0, tzinfo=dt.UTC)


def _cancelled_before_fault():
    planned = Planned(
        role="cancel_running",
        input={},
        action=TICKET,
        faults=[{"tool": TICKET, "kind": "before", "times": 2}],
    )
    # Claimed at T0, settled (reconciled: never applied) 20 s later; nothing downstream.
    effect = SimpleNamespace(
        tool=TICKET, key="thread:call", created_at=T0, updated_at=T0 + dt.timedelta(seconds=20)
    )
    return planned, effect


def test_an_uninjected_before_fault_with_no_kill_during_the_call_is_not_a_cut():
    planned, effect = _cancelled_before_fault()
    assert not call_cut_by_kill(planned, effect, killed_at=[])
    outside = [T0 - dt.timedelta(seconds=5), T0 + dt.timedelta(seconds=30)]
    assert not call_cut_by_kill(planned, effect, killed_at=outside)


def test_a_kill_while_the_effect_was_claimed_is_a_cut():
    planned, effect = _cancelled_before_fault()
    assert call_cut_by_kill(planned, effect, killed_at=[T0 + dt.timedelta(seconds=3)])
    planned.role = "timeout"
    assert not call_cut_by_kill(planned, effect, killed_at=[T0 + dt.timedelta(seconds=3)])
